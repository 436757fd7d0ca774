"""LeaderAndIsr (controller -> broker): become leader or follower of these partitions.

Refused whole (STALE_CONTROLLER_EPOCH) when it comes from a controller older than the
newest this broker has seen, and (STALE_BROKER_EPOCH) when it was meant for an earlier
registration of this broker; nothing changes then. A partition new to this broker may
need its topic's config from ZooKeeper first: then the answer comes once it is read.
The new leaders and epochs also update the metadata cache at once
(`MetadataCache.take_leaderships`), ahead of the UpdateMetadata that follows.
"""

from __future__ import annotations

from broker.protocol.apis import LEADER_AND_ISR_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.base import Answer, ApiHandler, run_async
from broker.server.metadata import PartitionState
from broker.server.partition import Leadership
from broker.server.replica_manager import PartitionDecision
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    refused = check_controller(ctx, body)
    if refused is not None:
        return error_response(body, refused)
    decisions = [
        PartitionDecision(
            topic["topic_name"],
            p["partition_index"],
            Leadership(
                p["leader"],
                p["leader_epoch"],
                tuple(p["isr"]),
                tuple(p["replicas"]),
                p["zk_version"],
                p["controller_epoch"],
            ),
            p["is_new"],
        )
        for topic in body["topic_states"]
        for p in topic["partition_states"]
    ]
    leaders = {
        leader["broker_id"]: (leader["host_name"], leader["port"])
        for leader in body["live_leaders"]
    }
    ctx.metadata.take_leaderships(
        PartitionState(d.topic, d.partition, d.state.leader, d.state.leader_epoch,
                       d.state.replicas, d.state.isr, (), d.state.controller_epoch,
                       d.state.zk_version)
        for d in decisions
    )  # fmt: skip
    unknown = {d.topic for d in decisions if ctx.replicas.get(d.topic, d.partition) is None}
    if unknown and ctx.cluster is not None:
        return run_async(ctx, _apply_after_configs(ctx, unknown, decisions, leaders))
    return _response(ctx.replicas.apply_leadership(decisions, leaders))


async def _apply_after_configs(ctx: BrokerContext, topics, decisions, leaders) -> dict:
    await ctx.cluster.load_topic_configs(topics)
    return _response(ctx.replicas.apply_leadership(decisions, leaders))


def check_controller(ctx: BrokerContext, body: dict) -> ErrorCode | None:
    """The checks every controller request passes before it changes anything."""
    if body["controller_epoch"] < ctx.replicas.controller_epoch:
        return ErrorCode.STALE_CONTROLLER_EPOCH
    # Meant for an earlier registration of this broker (KIP-380). Registrations only get
    # newer, and a request may overtake the answer to our own registration: only an older
    # epoch is stale.
    epoch = body.get("broker_epoch", -1)
    if ctx.cluster is not None and 0 <= epoch < ctx.cluster.broker_epoch:
        return ErrorCode.STALE_BROKER_EPOCH
    ctx.replicas.controller_epoch = body["controller_epoch"]
    return None


def _response(errors: dict) -> dict:
    return {
        "error_code": ErrorCode.NONE,
        "partition_errors": [
            {"topic_name": t, "partition_index": p, "error_code": code}
            for (t, p), code in sorted(errors.items())
        ],
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "error_code": code,
        "partition_errors": [
            {
                "topic_name": t["topic_name"],
                "partition_index": p["partition_index"],
                "error_code": code,
            }
            for t in body["topic_states"]
            for p in t["partition_states"]
        ],
    }


HANDLER = ApiHandler(LEADER_AND_ISR_API, handle, error_response)
