"""FindCoordinator: which broker coordinates a group (key type 0): the leader of the
group's partition of __consumer_offsets.

The first lookup in a cluster creates __consumer_offsets (`offsets.topic.num.partitions`
partitions, replication factor `offsets.topic.replication.factor` or the live brokers if
fewer, compacted); until its leaders are known the answer is COORDINATOR_NOT_AVAILABLE,
which clients retry. v4+ asks for several keys at once (KIP-699). Transaction
coordinators (key type 1) are not served: transactions are not implemented.
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

log = logging.getLogger(__name__)

GROUP_KEY_TYPE = 0


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
    if key_type != GROUP_KEY_TYPE:
        return _error(
            key,
            ErrorCode.INVALID_REQUEST,
            f"key type {key_type} is not served: this broker has no transaction coordinator",
        )
    if not key:
        return _error(key, ErrorCode.INVALID_GROUP_ID, "the group id is empty")
    if ctx.groups is None:
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, "no group coordinator")
    if ctx.metadata.partition_count(OFFSETS_TOPIC) == 0:
        _create_offsets_topic(ctx)
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} is being created")
    state = ctx.metadata.partition(OFFSETS_TOPIC, ctx.groups.manager.partition_of(key))
    leader = ctx.metadata.brokers.get(state.leader) if state is not None else None
    address = leader.address(request.session.listener) if leader is not None else None
    if address is None:
        return _error(
            key, ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group's offsets partition has no leader"
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


def _create_offsets_topic(ctx: BrokerContext) -> None:
    """Create __consumer_offsets once (lookups meanwhile answer COORDINATOR_NOT_AVAILABLE)."""
    manager = ctx.groups.manager
    if manager.creating_topic or ctx.admin is None:
        return
    cfg = ctx.config
    live = len(ctx.metadata.brokers)
    factor = min(cfg["offsets.topic.replication.factor"], max(live, 1))
    if factor < cfg["offsets.topic.replication.factor"]:
        log.warning(
            "creating %s with replication factor %d: offsets.topic.replication.factor is %d "
            "but only %d brokers are alive",
            OFFSETS_TOPIC,
            factor,
            cfg["offsets.topic.replication.factor"],
            live,
        )
    spec = TopicSpec(
        OFFSETS_TOPIC,
        cfg["offsets.topic.num.partitions"],
        factor,
        configs={
            "cleanup.policy": "compact",
            "segment.bytes": str(cfg["offsets.topic.segment.bytes"]),
            # As Kafka: the coordinator's batches are stored as written, whatever the
            # broker's compression.type.
            "compression.type": "producer",
        },
    )
    manager.creating_topic = True

    async def create() -> None:
        try:
            outcome = await ctx.admin.create_topics([spec], validate_only=False)
            error = outcome.get(OFFSETS_TOPIC)
            if error is not None and error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.error("creating %s failed: %s", OFFSETS_TOPIC, error.message)
        except Exception:
            log.exception("creating %s failed", OFFSETS_TOPIC)
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
