"""CreateAcls: each ACL checked and stored (broker/security/acl_store.py); one that is
already there is fine. A bad one answers INVALID_REQUEST with the reason and stops no
other. No authorizer: SECURITY_DISABLED."""

from __future__ import annotations

from broker.protocol.apis import CREATE_ACLS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl_wire import binding_from_wire
from broker.server.context import BrokerContext
from broker.server.handlers.acls import SECURITY_DISABLED_MESSAGE, error_of
from broker.server.handlers.base import Answer, ApiHandler, run_async
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    if ctx.authorizer is None:
        return error_response(body, ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE)
    bindings = [binding_from_wire(c) for c in body["creations"]]
    return run_async(ctx, _create(ctx, bindings))


async def _create(ctx: BrokerContext, bindings) -> dict:
    outcomes = await ctx.acl_store.create(bindings)
    results = []
    for exc in outcomes:
        code, message = error_of(exc)
        results.append({"error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "results": results}


def error_response(body: dict, code: ErrorCode, message: str | None = None) -> dict:
    return {
        "throttle_time_ms": 0,
        "results": [{"error_code": code, "error_message": message} for _ in body["creations"]],
    }


HANDLER = ApiHandler(CREATE_ACLS_API, handle, error_response)
