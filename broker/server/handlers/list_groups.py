"""ListGroups: the groups this broker coordinates (v4+: only those in the given states);
clients ask every broker and merge the answers."""

from __future__ import annotations

from broker.protocol.apis import LIST_GROUPS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.handlers.groups import coordinator_or_error
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    groups = coordinator_or_error(ctx)
    if isinstance(groups, ErrorCode):
        return error_response(body, groups)
    code, listed = groups.list_groups(set(body["states_filter"] or ()))
    # DESCRIBE on the cluster lists every group; else those the principal may describe.
    if not allowed(ctx, request, Operation.DESCRIBE, ResourceType.CLUSTER):
        listed = [
            g
            for g in listed
            if allowed(ctx, request, Operation.DESCRIBE, ResourceType.GROUP, g.group_id)
        ]
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "groups": [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type or "",
                "group_state": g.state.value,
            }
            for g in listed
        ],
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "groups": []}


HANDLER = ApiHandler(LIST_GROUPS_API, handle, error_response)
