"""SaslAuthenticate: one SASL token each way, after SaslHandshake v1
(broker/security/authenticator.py). A failure is answered, then the connection closes."""

from __future__ import annotations

from broker.protocol.apis import SASL_AUTHENTICATE_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    authenticator = request.session.authenticator
    if authenticator is None:
        return {
            **error_response(body, ErrorCode.ILLEGAL_SASL_STATE),
            "error_message": "this listener does not use SASL",
        }
    answer = authenticator.authenticate(body["auth_bytes"], request.api_version, ctx.now_ms())
    return {
        "error_code": answer.error_code,
        "error_message": answer.error_message,
        "auth_bytes": answer.auth_bytes,
        "session_lifetime_ms": answer.session_lifetime_ms,
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"error_code": code, "error_message": None, "auth_bytes": b"", "session_lifetime_ms": 0}


HANDLER = ApiHandler(SASL_AUTHENTICATE_API, handle, error_response)
