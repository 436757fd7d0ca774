"""From one request frame to what the connection must do next -- no I/O here.

Outcomes: send these parts; send nothing (acks=0); close the connection (a frame that
cannot be decoded, an unknown API or version); or wait for a delayed operation (already
in a purgatory) and then send its answer. Which API may wait and when is the handler's
business: the dispatcher only decodes, checks versions, calls and encodes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from broker.protocol.apis import API_VERSIONS, FETCH, PRODUCE
from broker.protocol.errors import ErrorCode
from broker.protocol.framing import (
    RequestHeader,
    decode_request_body,
    decode_request_header,
    encode_api_versions_error,
    encode_response,
)
from broker.protocol.types import DecodeError
from broker.security.authenticator import AuthenticationFailed
from broker.server.authorization import request_refusal
from broker.server.context import BrokerContext
from broker.server.handlers import HANDLERS
from broker.server.handlers.base import NO_RESPONSE, Delayed
from broker.server.request import RequestContext, Session
from broker.util.purgatory import DelayedOperation, OperationFailed

log = logging.getLogger(__name__)


@dataclass
class Respond:
    parts: list[Any]
    # Close the connection once the parts are sent, for this reason (a failed SASL
    # authentication is answered, then the connection ends).
    close: str | None = None


@dataclass
class NoResponse:
    pass


@dataclass
class Close:
    reason: str


# APIs whose delayed answers wait in a purgatory with their state change already made
# (Produce: the records appended, the answer waits for the in-sync replicas; Fetch: a
# follower's position recorded, the read waits for data). A connection's later requests
# may be handled meanwhile (broker/server/pipeline.py). Every other wait -- ZooKeeper
# writes, the controller, a group's rebalance -- holds the requests behind it, which may
# depend on what it changes.
READ_AHEAD_APIS = frozenset({PRODUCE, FETCH})


@dataclass
class Wait:
    """Send `respond(result)` once `operation` completes (by event or deadline)."""

    operation: DelayedOperation
    header: RequestHeader

    @property
    def read_ahead(self) -> bool:
        """Whether the connection's next requests may be handled while this one waits."""
        return self.header.api_key in READ_AHEAD_APIS

    def respond(self, body: dict | OperationFailed) -> Respond | Close:
        if isinstance(body, OperationFailed):
            return Close("internal error")
        return _encode(self.header, body)


Outcome = Respond | NoResponse | Close | Wait


def handle_frame(ctx: BrokerContext, session: Session, frame: bytes) -> Outcome:
    authenticator = session.authenticator
    if authenticator is not None and authenticator.expects_raw_tokens:
        return _raw_token(ctx, authenticator, frame)
    try:
        header, body_at = decode_request_header(frame)
    except DecodeError as exc:
        return Close(f"malformed request header: {exc}")
    key, version = header.api_key, header.api_version
    if authenticator is not None:
        refused = authenticator.admit(key, ctx.now_ms())
        if refused is not None:
            return Close(refused)
    handler = HANDLERS.get(key)
    if key == API_VERSIONS and not handler.declares(version):
        # Answer in v0, listing the ApiVersions range alone as Kafka does (KIP-511), so a
        # newer client retries with a version we speak and asks for the rest then.
        return Respond(encode_api_versions_error(header.correlation_id, {key: handler.advertised}))
    if handler is None or not handler.declares(version):
        return Close(f"unsupported API {key} v{version}")
    try:
        body = decode_request_body(frame, header, body_at)
    except DecodeError as exc:
        return Close(f"malformed {handler.api.name} v{version} request: {exc}")
    if version < (handler.accepted_from or 0):  # declared (above), not accepted
        return _encode(header, handler.error_response(body, ErrorCode.UNSUPPORTED_VERSION))
    request = RequestContext(header, session, ctx.now_ms())
    if ctx.authorizer is not None:  # ACLs (authorization.py); none configured: no call
        refusal = request_refusal(ctx, request, body)
        if refusal:
            return _encode(header, handler.error_response(body, refusal))
    try:
        result = handler.handle(ctx, request, body)
    except Exception:  # a bug must cost one connection, never the broker
        log.exception(
            "failed to handle %s v%s from %s", handler.api.name, version, header.client_id
        )
        return Close("internal error")
    if result is NO_RESPONSE:
        return NoResponse()
    if isinstance(result, Delayed):
        return Wait(result.operation, header)
    return _encode(header, result, session.closing)


def _raw_token(ctx: BrokerContext, authenticator, frame: bytes) -> Respond | Close:
    """A bare SASL token (after SaslHandshake v0): no header, answered size-prefixed."""
    try:
        return Respond([authenticator.raw_token(frame, ctx.now_ms())])
    except AuthenticationFailed as exc:
        return Close(str(exc))


def _encode(header: RequestHeader, body: dict, close: str | None = None) -> Respond | Close:
    try:
        return Respond(
            encode_response(header.api_key, header.api_version, header.correlation_id, body),
            close,
        )
    except Exception:
        log.exception("failed to encode the response to API %s v%s", *header[:2])
        return Close("internal error")
