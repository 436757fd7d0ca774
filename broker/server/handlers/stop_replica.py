"""StopReplica (controller -> broker): stop replicating these partitions, and with
`delete_partitions` remove them (a topic deletion, a replica moved away). From an older
controller it is refused and changes nothing."""

from __future__ import annotations

from broker.protocol.apis import STOP_REPLICA_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.handlers.leader_and_isr import check_controller
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    refused = check_controller(ctx, body)
    if refused is not None:
        return error_response(body, refused)
    partitions = [(t["name"], p) for t in body["topics"] for p in t["partition_indexes"]]
    ctx.replicas.stop_replicas(partitions, delete=body["delete_partitions"])
    if body["delete_partitions"]:
        for topic in {t for t, _ in partitions}:
            if not any(t == topic for t, _ in ctx.replicas.partitions):
                ctx.replicas.topic_configs.remove(topic)
    return {
        "error_code": ErrorCode.NONE,
        "partition_errors": [
            {"topic_name": t, "partition_index": p, "error_code": ErrorCode.NONE}
            for t, p in partitions
        ],
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "error_code": code,
        "partition_errors": [
            {"topic_name": t["name"], "partition_index": p, "error_code": code}
            for t in body["topics"]
            for p in t["partition_indexes"]
        ],
    }


HANDLER = ApiHandler(STOP_REPLICA_API, handle, error_response)
