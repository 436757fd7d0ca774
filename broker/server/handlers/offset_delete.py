"""OffsetDelete: forget a group's committed offsets of some partitions, except of topics
its members consume now (GROUP_SUBSCRIBED_TO_TOPIC)."""

from __future__ import annotations

from broker.protocol.apis import OFFSET_DELETE_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed, refused_partitions
from broker.server.context import BrokerContext
from broker.server.handlers.answers import partition_errors
from broker.server.handlers.base import Answer, ApiHandler, respond
from broker.server.handlers.groups import coordinator_or_error
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    groups = coordinator_or_error(ctx)
    if isinstance(groups, ErrorCode):
        return error_response(body, groups)
    if not allowed(ctx, request, Operation.DELETE, ResourceType.GROUP, body["group_id"]):
        return error_response(body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    refused = refused_partitions(ctx, request, Operation.READ, body["topics"])
    asked = [
        (t["name"], p["partition_index"])
        for t in body["topics"]
        for p in t["partitions"]
        if (t["name"], p["partition_index"]) not in refused
    ]
    result = groups.delete_offsets(body["group_id"], asked)
    return respond(result, lambda outcome: _body(body, outcome[0], {**outcome[1], **refused}))


def _body(body: dict, code: ErrorCode, errors: dict[tuple[str, int], ErrorCode]) -> dict:
    if code != ErrorCode.NONE:
        return error_response(body, code)
    return {
        "error_code": ErrorCode.NONE,
        "throttle_time_ms": 0,
        "topics": partition_errors(body["topics"], errors),
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"error_code": code, "throttle_time_ms": 0, "topics": []}


HANDLER = ApiHandler(OFFSET_DELETE_API, handle, error_response)
