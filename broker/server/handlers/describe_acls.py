"""DescribeAcls: the ACLs a filter matches, grouped by resource pattern, from the
authorizer's cache (every broker's follows the store). No authorizer: SECURITY_DISABLED."""

from __future__ import annotations

from collections import defaultdict

from broker.protocol.apis import DESCRIBE_ACLS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import AclError
from broker.security.acl_wire import entry_fields, filter_from_wire
from broker.server.context import BrokerContext
from broker.server.handlers.acls import SECURITY_DISABLED_MESSAGE, error_of
from broker.server.handlers.base import ApiHandler
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    if ctx.authorizer is None:
        return error_response(body, ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE)
    acl_filter = filter_from_wire(body)
    try:
        acl_filter.validate()
    except AclError as exc:
        return error_response(body, *error_of(exc))
    by_pattern = defaultdict(list)
    for binding in ctx.authorizer.bindings(acl_filter):
        by_pattern[binding.pattern].append(entry_fields(binding.entry))
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "resources": [
            {
                "resource_type": int(pattern.resource_type),
                "resource_name": pattern.name,
                "pattern_type": int(pattern.pattern_type),
                "acls": acls,
            }
            for pattern, acls in by_pattern.items()
        ],
    }


def error_response(body: dict, code: ErrorCode, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "resources": []}


HANDLER = ApiHandler(DESCRIBE_ACLS_API, handle, error_response)
