"""Heartbeat: a member is alive; the answer tells it to rejoin when a rebalance started."""

from __future__ import annotations

from broker.protocol.apis import HEARTBEAT_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.handlers.groups import coordinator_or_error
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    groups = coordinator_or_error(ctx)
    if isinstance(groups, ErrorCode):
        return error_response(body, groups)
    code = groups.heartbeat(
        body["group_id"], body["generation_id"], body["member_id"], body["group_instance_id"]
    )
    return error_response(body, code)


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": code}


HANDLER = ApiHandler(HEARTBEAT_API, handle, error_response)
