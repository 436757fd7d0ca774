"""AlterPartitionReassignments: move partitions to new replicas, or cancel a move (null
replicas). Answered by the active controller (NOT_CONTROLLER elsewhere; clients send it
there), which starts each move and answers at once: the move itself goes on until the
new replicas are in sync (ListPartitionReassignments shows it meanwhile). Each partition
is checked on its own (unknown partition, empty or duplicate replicas, unknown brokers);
a single broker has nowhere to move anything."""

from __future__ import annotations

from broker.cluster import NotController
from broker.protocol.apis import ALTER_PARTITION_REASSIGNMENTS_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.answers import by_topic
from broker.server.handlers.base import Answer, ApiHandler, run_async
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    asked = {
        (t["name"], p["partition_index"]): p["replicas"]
        for t in body["topics"]
        for p in t["partitions"]
    }
    if ctx.cluster is None:
        return error_response(
            body,
            ErrorCode.INVALID_REQUEST,
            "Partitions cannot be reassigned on a single broker (no zookeeper.connect).",
        )
    controller = ctx.cluster.controller
    if controller is None or not controller.is_active:
        return error_response(body, ErrorCode.NOT_CONTROLLER)
    return run_async(ctx, _alter(controller, body, asked))


async def _alter(controller, body: dict, asked: dict) -> dict:
    try:
        results = await controller.alter_reassignments(asked)
    except NotController:
        return error_response(body, ErrorCode.NOT_CONTROLLER)
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "responses": by_topic(
            results,
            lambda partition, result: {
                "partition_index": partition,
                "error_code": result[0],
                "error_message": result[1],
            },
        ),
    }


def error_response(body: dict, code: ErrorCode, message: str | None = None) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": message,
        "responses": [],
    }


HANDLER = ApiHandler(ALTER_PARTITION_REASSIGNMENTS_API, handle, error_response)
