"""SyncGroup: the leader hands in everyone's assignment; every member gets its own.

A member's answer waits until the leader's assignment is stored in __consumer_offsets
(broker/coordinator/coordinator.py).
"""

from __future__ import annotations

from broker.coordinator.coordinator import SyncResult
from broker.protocol.apis import SYNC_GROUP_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.base import Answer, ApiHandler, respond
from broker.server.handlers.groups import coordinator_or_error
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    groups = coordinator_or_error(ctx)
    if isinstance(groups, ErrorCode):
        return error_response(body, groups)
    result = groups.sync_group(
        body["group_id"],
        body["generation_id"],
        body["member_id"],
        body["group_instance_id"],
        body["protocol_type"],
        body["protocol_name"],
        {a["member_id"]: a["assignment"] for a in body["assignments"]},
    )
    return respond(result, _body)


def _body(result: SyncResult) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return _body(SyncResult(code))


HANDLER = ApiHandler(SYNC_GROUP_API, handle, error_response)
