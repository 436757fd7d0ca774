"""SaslHandshake: the client names its SASL mechanism (broker/security/authenticator.py).

On a listener without SASL the answer is ILLEGAL_SASL_STATE, as Kafka's. The enabled list
is always filled in: kafka-python fails when its mechanism is missing from it.
"""

from __future__ import annotations

from broker.protocol.apis import SASL_HANDSHAKE_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    authenticator = request.session.authenticator
    if authenticator is None:
        return error_response(body, ErrorCode.ILLEGAL_SASL_STATE)
    answer = authenticator.handshake(body["mechanism"], request.api_version)
    return {"error_code": answer.error_code, "mechanisms": answer.mechanisms}


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"error_code": code, "mechanisms": []}


HANDLER = ApiHandler(SASL_HANDSHAKE_API, handle, error_response)
