"""ApiVersions: the version range of every API this broker serves.

A version we do not speak is answered by the dispatcher before decoding (a v0 body with
UNSUPPORTED_VERSION and these ranges, so the client can retry lower).
"""

from __future__ import annotations

from broker.protocol.apis import API_VERSIONS_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.request import RequestContext


def api_keys() -> list[dict]:
    # Imported here: the package builds its handler table by importing this module.
    from broker.server.handlers import advertised_ranges

    return [
        {"api_key": k, "min_version": lo, "max_version": hi}
        for k, (lo, hi) in advertised_ranges().items()
    ]


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    return {"error_code": ErrorCode.NONE, "api_keys": api_keys(), "throttle_time_ms": 0}


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"error_code": code, "api_keys": api_keys(), "throttle_time_ms": 0}


HANDLER = ApiHandler(API_VERSIONS_API, handle, error_response)
