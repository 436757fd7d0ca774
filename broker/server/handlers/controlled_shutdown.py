"""ControlledShutdown (a stopping broker -> the controller): move its leaderships away
first. Answered by the active controller only (NOT_CONTROLLER elsewhere, and on a single
broker, which has nobody to hand leadership to); the answer lists the partitions it
still leads (a replication factor of 1, or no other replica in sync)."""

from __future__ import annotations

from broker.protocol.apis import CONTROLLED_SHUTDOWN_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.base import Answer, ApiHandler, run_async
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    controller = ctx.cluster.controller if ctx.cluster is not None else None
    if controller is None or not controller.is_active:
        return error_response(body, ErrorCode.NOT_CONTROLLER)
    return run_async(ctx, _shutdown(controller, body))


async def _shutdown(controller, body: dict) -> dict:
    code, remaining = await controller.controlled_shutdown(body["broker_id"], body["broker_epoch"])
    return {
        "error_code": code,
        "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining],
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"error_code": code, "remaining_partitions": []}


HANDLER = ApiHandler(CONTROLLED_SHUTDOWN_API, handle, error_response)
