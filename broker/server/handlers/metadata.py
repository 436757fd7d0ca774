"""Metadata: brokers, controller and topics, all read from the MetadataCache.

A request naming topics that do not exist creates them when `auto.create.topics.enable`
and the request's `allow_auto_topic_creation` both say so (this is where Kafka creates
topics automatically; Produce to an unknown topic answers UNKNOWN_TOPIC_OR_PARTITION).

With an authorizer: topics the principal may not DESCRIBE are left out of an all-topics
answer and answer TOPIC_AUTHORIZATION_FAILED when named; auto-creation needs CREATE on the
cluster or the topic (else TOPIC_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from broker.protocol.apis import METADATA_API
from broker.protocol.codec import encode_struct
from broker.protocol.errors import ErrorCode
from broker.protocol.topic import is_legal_topic_name
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import NOT_ASKED, allowed, authorized_operations
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.metadata import PartitionState
from broker.server.request import RequestContext

# The declaration of one topic of the answer (its entries are cached encoded).
_TOPIC = next(f.type for f in METADATA_API.response.fields if f.name == "topics").element


def _topic_entry(
    ctx: BrokerContext, name: str, auto_created: set[str], reachable: frozenset[int]
) -> dict:
    partitions = ctx.metadata.topics.get(name)
    if partitions is None:
        if not is_legal_topic_name(name):
            code = ErrorCode.INVALID_TOPIC_EXCEPTION
        elif name in auto_created:
            code = ErrorCode.LEADER_NOT_AVAILABLE
        else:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return {"error_code": code, "name": name, "is_internal": False, "partitions": []}
    live = ctx.metadata.brokers
    return {
        "error_code": ErrorCode.NONE,
        "name": name,
        "is_internal": name in ctx.metadata.internal_topics,
        "partitions": [
            _partition_entry(p, live, reachable)
            for p in sorted(partitions.values(), key=lambda s: s.partition)
        ],
        "topic_authorized_operations": NOT_ASKED,
    }


def _cached_topic_entry(
    ctx: BrokerContext,
    request: RequestContext,
    name: str,
    auto_created: set[str],
    reachable: frozenset[int],
) -> dict | bytes:
    """An existing topic's entry as the metadata cache keeps it encoded (the same bytes
    the codec gives its dict; it encodes them when the topic or the live brokers changed
    since, server/metadata.py); other topics' error entries as dicts."""
    if name not in ctx.metadata.topics:
        return _topic_entry(ctx, name, auto_created, reachable)
    version = request.api_version

    def encode() -> bytes:
        entry = _topic_entry(ctx, name, auto_created, reachable)
        return encode_struct(_TOPIC, version, METADATA_API.is_flexible(version), entry)

    return ctx.metadata.encoded_topic(name, (version, request.session.listener), encode)


def _partition_entry(p: PartitionState, live: dict, reachable: frozenset[int]) -> dict:
    """One partition: a dict of fields already held (the replica tuples encode as
    arrays); which brokers are live and reachable was worked out once per request
    (Metadata for thousands of partitions runs this per partition)."""
    leader, code = p.leader, ErrorCode.NONE
    if leader not in reachable:
        if leader < 0 or leader not in live:  # no leader, or its broker is gone
            code = ErrorCode.LEADER_NOT_AVAILABLE
        else:  # live, but with no endpoint on the listener the request came in on
            code = ErrorCode.LISTENER_NOT_FOUND
        leader = -1
    return {
        "error_code": code,
        "partition_index": p.partition,
        "leader_id": leader,
        "leader_epoch": p.leader_epoch,
        "replica_nodes": p.replicas,
        "isr_nodes": p.isr,
        "offline_replicas": p.offline_replicas,
    }


def _brokers(ctx: BrokerContext, listener: str) -> list[dict]:
    """The live brokers with an endpoint on the listener the request came in on."""
    found = []
    for b in sorted(ctx.metadata.brokers.values(), key=lambda b: b.broker_id):
        address = b.address(listener)
        if address is not None:
            found.append({"node_id": b.broker_id, "host": address[0], "port": address[1],
                          "rack": b.rack})  # fmt: skip
    return found


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    requested = body.get("topics")
    listener = request.session.listener
    auto_created: set[str] = set()
    refused: list[str] = []
    # v0 asks for every topic with an empty list; v1+ with null.
    if requested is None or (request.api_version == 0 and not requested):
        # Topics the principal may not describe are left out, silently.
        names = [n for n in sorted(ctx.metadata.topics) if _describable(ctx, request, n)]
    else:
        names = []
        for name in (t["name"] for t in requested):
            (names if _describable(ctx, request, name) else refused).append(name)
        auto = ctx.config["auto.create.topics.enable"] and body.get(
            "allow_auto_topic_creation", True
        )
        for name in list(names):
            if auto and name not in ctx.metadata.topics and is_legal_topic_name(name):
                if not _may_create(ctx, request, name):
                    names.remove(name)
                    refused.append(name)
                    continue
                # A single broker has it at once; in a cluster the controller will, and
                # the answer says LEADER_NOT_AVAILABLE meanwhile, as Kafka's does.
                ctx.admin.auto_create(name)
                auto_created.add(name)
    brokers = _brokers(ctx, listener)
    reachable = frozenset(b["node_id"] for b in brokers)
    if body.get("include_topic_authorized_operations"):
        topics = [_topic_entry(ctx, n, auto_created, reachable) for n in names]
        for topic in topics:
            topic["topic_authorized_operations"] = authorized_operations(
                ctx, request, ResourceType.TOPIC, topic["name"]
            )
    else:
        topics = [_cached_topic_entry(ctx, request, n, auto_created, reachable) for n in names]
    cluster_operations = NOT_ASKED
    if body.get("include_cluster_authorized_operations"):
        cluster_operations = authorized_operations(ctx, request, ResourceType.CLUSTER)
    refusal = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return {
        "throttle_time_ms": 0,
        "brokers": brokers,
        "cluster_id": ctx.metadata.cluster_id,
        "controller_id": ctx.metadata.controller_id,
        "topics": topics
        + [
            {"error_code": refusal, "name": n, "is_internal": False, "partitions": []}
            for n in refused
        ],
        "cluster_authorized_operations": cluster_operations,
    }


def _describable(ctx: BrokerContext, request: RequestContext, name: str) -> bool:
    return allowed(ctx, request, Operation.DESCRIBE, ResourceType.TOPIC, name)


def _may_create(ctx: BrokerContext, request: RequestContext, name: str) -> bool:
    """Auto-creation, as CreateTopics: CREATE on the cluster or on the topic."""
    return allowed(ctx, request, Operation.CREATE, ResourceType.CLUSTER) or allowed(
        ctx, request, Operation.CREATE, ResourceType.TOPIC, name
    )


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "brokers": [],
        "cluster_id": None,
        "controller_id": -1,
        "topics": [
            {"error_code": code, "name": t["name"], "is_internal": False, "partitions": []}
            for t in body.get("topics") or []
        ],
        "cluster_authorized_operations": NOT_ASKED,
    }


HANDLER = ApiHandler(METADATA_API, handle, error_response)
