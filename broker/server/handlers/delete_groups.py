"""DeleteGroups: remove empty groups and their committed offsets (NON_EMPTY_GROUP while a
group has members); answered once the tombstones are replicated."""

from __future__ import annotations

from broker.protocol.apis import DELETE_GROUPS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed
from broker.server.context import BrokerContext
from broker.server.handlers.base import Answer, ApiHandler, respond
from broker.server.handlers.groups import coordinator_or_error
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    groups = coordinator_or_error(ctx)
    if isinstance(groups, ErrorCode):
        return error_response(body, groups)
    refused = {
        g: ErrorCode.GROUP_AUTHORIZATION_FAILED
        for g in body["groups_names"]
        if not allowed(ctx, request, Operation.DELETE, ResourceType.GROUP, g)
    }
    result = groups.delete_groups([g for g in body["groups_names"] if g not in refused])
    return respond(result, lambda errors: _body(body, {**errors, **refused}))


def _body(body: dict, errors: dict[str, ErrorCode]) -> dict:
    return {
        "throttle_time_ms": 0,
        "results": [{"group_id": g, "error_code": errors[g]} for g in body["groups_names"]],
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return _body(body, {g: code for g in body["groups_names"]})


HANDLER = ApiHandler(DELETE_GROUPS_API, handle, error_response)
