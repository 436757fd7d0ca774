"""LeaveGroup: members leave at once (the group rebalances without waiting for their
sessions to end); v3+ names several, static ones by their group.instance.id."""

from __future__ import annotations

from broker.protocol.apis import LEAVE_GROUP_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.handlers.groups import coordinator_or_error
from broker.server.request import RequestContext


def _members(body: dict, version: int) -> list[tuple[str, str | None]]:
    if version < 3:
        return [(body["member_id"], None)]
    return [(m["member_id"], m["group_instance_id"]) for m in body["members"]]


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    groups = coordinator_or_error(ctx)
    if isinstance(groups, ErrorCode):
        return error_response(body, groups)
    leaving = _members(body, request.api_version)
    code, each = groups.leave_group(body["group_id"], leaving)
    if request.api_version < 3 and code == ErrorCode.NONE:
        code = each[0]  # one member: its error is the request's
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "members": [
            {"member_id": m, "group_instance_id": i, "error_code": e}
            for (m, i), e in zip(leaving, each, strict=True)
        ],
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "members": []}


HANDLER = ApiHandler(LEAVE_GROUP_API, handle, error_response)
