"""ListPartitionReassignments: the moves under way, each partition with all its replicas
while it moves and which of them are being added and removed. Answered by the active
controller (NOT_CONTROLLER elsewhere); a single broker never has any."""

from __future__ import annotations

from broker.cluster import NotController
from broker.protocol.apis import LIST_PARTITION_REASSIGNMENTS_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    asked = (
        None
        if body["topics"] is None
        else [(t["name"], p) for t in body["topics"] for p in t["partition_indexes"]]
    )
    if ctx.cluster is None:
        return _body({})
    controller = ctx.cluster.controller
    if controller is None:
        return error_response(body, ErrorCode.NOT_CONTROLLER)
    try:
        return _body(controller.reassignments(asked))
    except NotController:
        return error_response(body, ErrorCode.NOT_CONTROLLER)


def _body(moving: dict) -> dict:
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), (replicas, adding, removing) in sorted(moving.items()):
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "replicas": replicas,
                "adding_replicas": adding,
                "removing_replicas": removing,
            }
        )
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": None, "topics": []}


HANDLER = ApiHandler(LIST_PARTITION_REASSIGNMENTS_API, handle, error_response)
