"""DeleteAcls: per filter, every stored ACL it matches is deleted and listed in the
answer. No authorizer: SECURITY_DISABLED."""

from __future__ import annotations

from broker.protocol.apis import DELETE_ACLS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl_wire import binding_fields, filter_from_wire
from broker.server.context import BrokerContext
from broker.server.handlers.acls import SECURITY_DISABLED_MESSAGE, error_of
from broker.server.handlers.base import Answer, ApiHandler, run_async
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    if ctx.authorizer is None:
        return error_response(body, ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE)
    filters = [filter_from_wire(f) for f in body["filters"]]
    return run_async(ctx, _delete(ctx, filters))


async def _delete(ctx: BrokerContext, filters) -> dict:
    results = []
    for deleted, exc in await ctx.acl_store.delete(filters):
        code, message = error_of(exc)
        matching = [
            {"error_code": ErrorCode.NONE, "error_message": None, **binding_fields(b)}
            for b in deleted
        ]
        results.append({"error_code": code, "error_message": message, "matching_acls": matching})
    return {"throttle_time_ms": 0, "filter_results": results}


def error_response(body: dict, code: ErrorCode, message: str | None = None) -> dict:
    return {
        "throttle_time_ms": 0,
        "filter_results": [
            {"error_code": code, "error_message": message, "matching_acls": []}
            for _ in body["filters"]
        ],
    }


HANDLER = ApiHandler(DELETE_ACLS_API, handle, error_response)
