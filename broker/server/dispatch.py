"""From one request frame to what the connection must do next -- no I/O here.

Outcomes: send these parts; send nothing (acks=0); close the connection (a frame
that cannot be decoded, an unknown API); or park a fetch until data or its deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.protocol.apis import (
    API_VERSIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    FETCH,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
)
from broker.protocol.errors import ErrorCode
from broker.protocol.framing import (
    RequestHeader,
    decode_request,
    decode_request_header,
    encode_api_versions_error,
    encode_response,
)
from broker.protocol.types import DecodeError
from broker.server.context import BrokerContext
from broker.server.handlers import (
    api_versions,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
    topics,
)
from broker.server.versions import SUPPORTED, is_accepted, is_decodable

log = logging.getLogger(__name__)

Handler = Callable[[BrokerContext, RequestHeader, dict], dict]
ErrorResponder = Callable[[dict, ErrorCode], dict]

HANDLERS: dict[int, tuple[Handler, ErrorResponder]] = {
    PRODUCE: (produce.handle, produce.error_response),
    FETCH: (fetch.handle, fetch.error_response),
    LIST_OFFSETS: (list_offsets.handle, list_offsets.error_response),
    METADATA: (metadata.handle, metadata.handle_error),
    API_VERSIONS: (api_versions.handle, api_versions.error_response),
    CREATE_TOPICS: (topics.create, topics.create_error_response),
    DELETE_TOPICS: (topics.delete, topics.delete_error_response),
    INIT_PRODUCER_ID: (init_producer_id.handle, init_producer_id.error_response),
}


@dataclass
class Respond:
    parts: list[Any]


@dataclass
class NoResponse:
    pass


@dataclass
class Close:
    reason: str


@dataclass
class ParkFetch:
    """Retry `attempt(final)` when one of `partitions` grows, or at `deadline_ms`."""

    header: RequestHeader
    request: dict
    partitions: list[tuple[str, int]]
    deadline_ms: int

    def attempt(self, ctx: BrokerContext, final: bool) -> Respond | None:
        body = fetch.handle(ctx, self.header, self.request, final=final)
        if body is None:
            return None
        return Respond(
            encode_response(FETCH, self.header.api_version, self.header.correlation_id, body)
        )


Outcome = Respond | NoResponse | Close | ParkFetch


def handle_frame(ctx: BrokerContext, frame: bytes) -> Outcome:
    try:
        header, _ = decode_request_header(frame)
    except DecodeError as exc:
        return Close(f"malformed request header: {exc}")
    key, version = header.api_key, header.api_version
    if key == API_VERSIONS and not is_accepted(key, version):
        # Answer in v0 so a newer client can retry with a version we speak.
        return Respond(
            encode_api_versions_error(
                header.correlation_id, {k: s.advertised for k, s in SUPPORTED.items()}
            )
        )
    if key not in HANDLERS or not is_decodable(key, version):
        return Close(f"unsupported API {key} v{version}")
    try:
        header, request = decode_request(frame)
    except DecodeError as exc:
        return Close(f"malformed {key} v{version} request: {exc}")
    try:
        return _handle(ctx, header, request)
    except Exception:  # a bug must cost one connection, never the broker
        log.exception("failed to handle %s v%s from %s", key, version, header.client_id)
        return Close("internal error")


def _handle(ctx: BrokerContext, header: RequestHeader, request: dict) -> Outcome:
    key, version = header.api_key, header.api_version
    handler, error_responder = HANDLERS[key]
    if not is_accepted(key, version):
        body = error_responder(request, ErrorCode.UNSUPPORTED_VERSION)
        return Respond(encode_response(key, version, header.correlation_id, body))
    if key == PRODUCE and request["acks"] == 0:
        handler(ctx, header, request)
        return NoResponse()
    if key == FETCH and request["max_wait_ms"] > 0 and request["min_bytes"] > 0:
        park = ParkFetch(
            header, request, fetch.partitions_of(request), ctx.now_ms() + request["max_wait_ms"]
        )
        return park.attempt(ctx, final=False) or park
    body = handler(ctx, header, request)
    return Respond(encode_response(key, version, header.correlation_id, body))
