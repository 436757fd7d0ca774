"""FindCoordinator: which broker coordinates a group (key type 0) or a transactional id
(key type 1): the leader of the key's partition of __consumer_offsets or
__transaction_state.

The first lookup of a kind in a cluster creates its topic (`offsets.topic.*` or
`transaction.state.log.*`: partitions, replication factor or the live brokers if fewer,
compacted; docs/contracts/consumer-groups.md, transactions.md); until its leaders are
known the answer is COORDINATOR_NOT_AVAILABLE, which clients retry. v4+ asks for several
keys at once (KIP-699).
"""

from __future__ import annotations

import logging

from broker.cluster import TopicSpec
from broker.coordinator.offsets_topic import OFFSETS_TOPIC
from broker.protocol.apis import FIND_COORDINATOR_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import refused_code
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.request import RequestContext
from broker.transactions.state_topic import TRANSACTION_STATE_TOPIC

log = logging.getLogger(__name__)

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    keys = body["coordinator_keys"] if request.api_version >= 4 else [body["key"]]
    answers = [_find(ctx, request, key, body["key_type"]) for key in keys]
    if request.api_version >= 4:
        return {"throttle_time_ms": 0, "coordinators": answers}
    return {"throttle_time_ms": 0, **{k: v for k, v in answers[0].items() if k != "key"}}


def _find(ctx: BrokerContext, request: RequestContext, key: str, key_type: int) -> dict:
    resource_type = (
        ResourceType.GROUP if key_type == GROUP_KEY_TYPE else ResourceType.TRANSACTIONAL_ID
    )
    refused = refused_code(ctx, request, Operation.DESCRIBE, resource_type, key)
    if refused:
        return _error(key, refused)
    if key_type == GROUP_KEY_TYPE:
        if not key:
            return _error(key, ErrorCode.INVALID_GROUP_ID, "the group id is empty")
        owner, topic, spec = ctx.groups, OFFSETS_TOPIC, _offsets_topic
    elif key_type == TRANSACTION_KEY_TYPE:
        if not key:
            return _error(key, ErrorCode.INVALID_REQUEST, "the transactional id is empty")
        owner, topic, spec = ctx.transactions, TRANSACTION_STATE_TOPIC, _transaction_state_topic
    else:
        return _error(key, ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}")
    if owner is None:
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"no coordinator for {topic}")
    manager = owner.manager if key_type == GROUP_KEY_TYPE else owner
    if ctx.metadata.partition_count(topic) == 0:
        _create_internal_topic(ctx, manager, spec)
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic} is being created")
    state = ctx.metadata.partition(topic, manager.partition_of(key))
    leader = ctx.metadata.brokers.get(state.leader) if state is not None else None
    address = leader.address(request.session.listener) if leader is not None else None
    if address is None:
        return _error(
            key,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"the key's partition of {topic} has no leader",
        )
    host, port = address
    return {
        "key": key,
        "node_id": leader.broker_id,
        "host": host,
        "port": port,
        "error_code": ErrorCode.NONE,
        "error_message": None,
    }


def _error(key: str, code: ErrorCode, message: str | None = None) -> dict:
    return {
        "key": key,
        "node_id": -1,
        "host": "",
        "port": -1,
        "error_code": code,
        "error_message": message,
    }


def _factor(ctx: BrokerContext, topic: str, key: str) -> int:
    """The configured replication factor, or the live brokers if fewer (as for
    auto-created topics; Kafka would wait for enough brokers instead)."""
    wanted = ctx.config[key]
    live = len(ctx.metadata.brokers)
    factor = min(wanted, max(live, 1))
    if factor < wanted:
        log.warning(
            "creating %s with replication factor %d: %s is %d but only %d brokers are alive",
            topic,
            factor,
            key,
            wanted,
            live,
        )
    return factor


def _offsets_topic(ctx: BrokerContext) -> TopicSpec:
    cfg = ctx.config
    return TopicSpec(
        OFFSETS_TOPIC,
        cfg["offsets.topic.num.partitions"],
        _factor(ctx, OFFSETS_TOPIC, "offsets.topic.replication.factor"),
        configs={
            "cleanup.policy": "compact",
            "segment.bytes": str(cfg["offsets.topic.segment.bytes"]),
            # As Kafka: the coordinator's batches are stored as written, whatever the
            # broker's compression.type.
            "compression.type": "producer",
        },
    )


def _transaction_state_topic(ctx: BrokerContext) -> TopicSpec:
    cfg = ctx.config
    factor = _factor(ctx, TRANSACTION_STATE_TOPIC, "transaction.state.log.replication.factor")
    return TopicSpec(
        TRANSACTION_STATE_TOPIC,
        cfg["transaction.state.log.num.partitions"],
        factor,
        configs={
            "cleanup.policy": "compact",
            "segment.bytes": str(cfg["transaction.state.log.segment.bytes"]),
            # A replication factor lowered to the live brokers lowers the min ISR with it,
            # or no state write could ever be acknowledged (a single broker).
            "min.insync.replicas": str(min(cfg["transaction.state.log.min.isr"], factor)),
            "compression.type": "uncompressed",
        },
    )


def _create_internal_topic(ctx: BrokerContext, manager, make_spec) -> None:
    """Create a coordinator's topic once (`manager.creating_topic` while it is under way;
    lookups meanwhile answer COORDINATOR_NOT_AVAILABLE)."""
    if manager.creating_topic or ctx.admin is None:
        return
    spec = make_spec(ctx)
    manager.creating_topic = True

    async def create() -> None:
        try:
            outcome = await ctx.admin.create_topics([spec], validate_only=False)
            error = outcome.get(spec.name)
            if error is not None and error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.error("creating %s failed: %s", spec.name, error.message)
        except Exception:
            log.exception("creating %s failed", spec.name)
        finally:
            manager.creating_topic = False

    ctx.spawn(create())


def error_response(body: dict, code: ErrorCode) -> dict:
    answer = _error(body.get("key", ""), code)
    del answer["key"]
    return {
        "throttle_time_ms": 0,
        **answer,
        "coordinators": [_error(k, code) for k in body.get("coordinator_keys") or []],
    }


HANDLER = ApiHandler(FIND_COORDINATOR_API, handle, error_response)
