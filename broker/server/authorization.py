"""Which operation each API needs, as Kafka's KafkaApis asks its authorizer, and the
checks handlers share. Without an authorizer (`authorizer.class.name` empty) everything
is allowed and nothing here costs more than one attribute test.

Two kinds of check (docs/contracts/security.md, Authorization):
- per request, here in REQUEST_ACTIONS, made by the dispatcher before the handler runs:
  the request names one resource (the cluster, or a group) and a refusal answers the
  whole request with the resource's *_AUTHORIZATION_FAILED (`handler.error_response`);
- per item, in the handlers, where the protocol answers per topic, partition, group or
  config resource (`allowed`, `refused_code`).

The rest of Kafka's table, in the handlers: Produce WRITE topic (and WRITE on the
transactional id); Fetch READ topic, a follower's CLUSTER_ACTION; ListOffsets and
OffsetForLeaderEpoch DESCRIBE topic (a follower's: CLUSTER_ACTION); Metadata DESCRIBE
topic (others hidden), auto-creation CREATE cluster or topic; OffsetCommit READ group and
topic; OffsetFetch DESCRIBE group and topic; OffsetDelete DELETE group, READ topic;
FindCoordinator DESCRIBE group or transactional id; DescribeGroups DESCRIBE group;
ListGroups DESCRIBE cluster or each group; DeleteGroups DELETE group; CreateTopics CREATE
cluster or topic; DeleteTopics DELETE topic; CreatePartitions ALTER topic;
DescribeConfigs DESCRIBE_CONFIGS and (Incremental)AlterConfigs ALTER_CONFIGS on the topic
or the cluster (broker resources); InitProducerId WRITE on the transactional id, else
IDEMPOTENT_WRITE on the cluster or WRITE on some topic; AddPartitionsToTxn WRITE on the
transactional id and each topic (v4: CLUSTER_ACTION); AddOffsetsToTxn READ group;
DescribeCluster DESCRIBE cluster;
DescribeProducers READ topic; WriteTxnMarkers CLUSTER_ACTION; DescribeTransactions DESCRIBE
transactional id; ListTransactions DESCRIBE transactional id (others left out).
"""

from __future__ import annotations

from collections.abc import Callable

from broker.protocol.apis import ApiKey
from broker.protocol.errors import ErrorCode
from broker.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    Operation,
    ResourceType,
    authorized_operations_bits,
)
from broker.server.context import BrokerContext
from broker.server.request import RequestContext

CLUSTER, GROUP = ResourceType.CLUSTER, ResourceType.GROUP

REFUSED = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def _cluster(body: dict) -> str:
    return CLUSTER_NAME


def _group(body: dict) -> str:
    return body["group_id"]


def _transactional_id(body: dict) -> str:
    return body["transactional_id"]


# api key -> (resource type, operation, the resource's name in the request)
REQUEST_ACTIONS: dict[int, tuple[ResourceType, Operation, Callable[[dict], str]]] = {
    # inter-broker and controller APIs
    ApiKey.LEADER_AND_ISR: (CLUSTER, Operation.CLUSTER_ACTION, _cluster),
    ApiKey.STOP_REPLICA: (CLUSTER, Operation.CLUSTER_ACTION, _cluster),
    ApiKey.UPDATE_METADATA: (CLUSTER, Operation.CLUSTER_ACTION, _cluster),
    ApiKey.CONTROLLED_SHUTDOWN: (CLUSTER, Operation.CLUSTER_ACTION, _cluster),
    ApiKey.WRITE_TXN_MARKERS: (CLUSTER, Operation.CLUSTER_ACTION, _cluster),
    # a consumer group's membership
    ApiKey.JOIN_GROUP: (GROUP, Operation.READ, _group),
    ApiKey.SYNC_GROUP: (GROUP, Operation.READ, _group),
    ApiKey.HEARTBEAT: (GROUP, Operation.READ, _group),
    ApiKey.LEAVE_GROUP: (GROUP, Operation.READ, _group),
    # a producer's transaction (AddPartitionsToTxn: per version, in its handler)
    ApiKey.ADD_OFFSETS_TO_TXN: (ResourceType.TRANSACTIONAL_ID, Operation.WRITE, _transactional_id),
    ApiKey.END_TXN: (ResourceType.TRANSACTIONAL_ID, Operation.WRITE, _transactional_id),
    # cluster administration
    ApiKey.ELECT_LEADERS: (CLUSTER, Operation.ALTER, _cluster),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (CLUSTER, Operation.ALTER, _cluster),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (CLUSTER, Operation.DESCRIBE, _cluster),
    ApiKey.DESCRIBE_CLUSTER: (CLUSTER, Operation.DESCRIBE, _cluster),
    ApiKey.DESCRIBE_LOG_DIRS: (CLUSTER, Operation.DESCRIBE, _cluster),
    ApiKey.DESCRIBE_ACLS: (CLUSTER, Operation.DESCRIBE, _cluster),
    ApiKey.CREATE_ACLS: (CLUSTER, Operation.ALTER, _cluster),
    ApiKey.DELETE_ACLS: (CLUSTER, Operation.ALTER, _cluster),
    # SCRAM credentials
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (CLUSTER, Operation.DESCRIBE, _cluster),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (CLUSTER, Operation.ALTER, _cluster),
}


def request_refusal(broker: BrokerContext, request: RequestContext, body: dict) -> ErrorCode:
    """NONE, or the error that answers the whole request (the dispatcher's check)."""
    if broker.authorizer is None:
        return ErrorCode.NONE
    action = REQUEST_ACTIONS.get(request.api_key)
    if action is None:
        return ErrorCode.NONE
    resource_type, operation, name_of = action
    if allowed(broker, request, operation, resource_type, name_of(body)):
        return ErrorCode.NONE
    return REFUSED[resource_type]


def allowed(
    broker: BrokerContext,
    request: RequestContext,
    operation: Operation,
    resource_type: ResourceType,
    name: str = CLUSTER_NAME,
) -> bool:
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    session = request.session
    return authorizer.authorize(
        session.principal, session.client_host, operation, resource_type, name
    )


def refused_code(
    broker: BrokerContext,
    request: RequestContext,
    operation: Operation,
    resource_type: ResourceType,
    name: str = CLUSTER_NAME,
) -> ErrorCode:
    """NONE when allowed, else the resource type's *_AUTHORIZATION_FAILED."""
    if allowed(broker, request, operation, resource_type, name):
        return ErrorCode.NONE
    return REFUSED[resource_type]


def refused_partitions(
    broker: BrokerContext, request: RequestContext, operation: Operation, topics: list[dict]
) -> dict[tuple[str, int], ErrorCode]:
    """(topic, partition) -> TOPIC_AUTHORIZATION_FAILED for the partitions of the topics
    (`{"name", "partitions": [{"partition_index"}]}`, as OffsetCommit and OffsetDelete
    carry them) the principal may not do `operation` on."""
    if broker.authorizer is None:
        return {}
    return {
        (t["name"], p["partition_index"]): ErrorCode.TOPIC_AUTHORIZATION_FAILED
        for t in topics
        if not allowed(broker, request, operation, ResourceType.TOPIC, t["name"])
        for p in t["partitions"]
    }


def allowed_on_any(
    broker: BrokerContext, request: RequestContext, operation: Operation, resource_type
) -> bool:
    """May the principal do `operation` on some resource of the type?"""
    if broker.authorizer is None:
        return True
    session = request.session
    return broker.authorizer.authorize_any(
        session.principal, session.client_host, operation, resource_type
    )


# Kafka's "not asked for" value of the authorized-operations fields.
NOT_ASKED = -(2**31)


def authorized_operations(
    broker: BrokerContext,
    request: RequestContext,
    resource_type: ResourceType,
    name: str = CLUSTER_NAME,
) -> int:
    """The bit set of what the principal may do on the resource (everything the type
    supports, without an authorizer)."""
    if broker.authorizer is None:
        return authorized_operations_bits(SUPPORTED_OPERATIONS[resource_type])
    session = request.session
    return broker.authorizer.authorized_operations(
        session.principal, session.client_host, resource_type, name
    )


def config_refusal(
    broker: BrokerContext, request: RequestContext, operation: Operation, resource: dict
) -> ErrorCode:
    """DescribeConfigs (DESCRIBE_CONFIGS), AlterConfigs and IncrementalAlterConfigs
    (ALTER_CONFIGS): a topic's configs need the operation on the topic, a broker's (or a
    broker logger's) on the cluster."""
    if resource["resource_type"] == CONFIG_TOPIC:
        return refused_code(
            broker, request, operation, ResourceType.TOPIC, resource["resource_name"]
        )
    return refused_code(broker, request, operation, ResourceType.CLUSTER)


# The config resource type of topics in DescribeConfigs and AlterConfigs.
CONFIG_TOPIC = 2
