from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.server.versions import advertised_ranges


def api_keys() -> list[dict]:
    return [
        {"api_key": k, "min_version": lo, "max_version": hi}
        for k, (lo, hi) in advertised_ranges().items()
    ]


def handle(ctx, header, request: dict) -> dict:
    return {"error_code": ErrorCode.NONE, "api_keys": api_keys(), "throttle_time_ms": 0}


def error_response(request: dict, code: ErrorCode) -> dict:
    return {"error_code": code, "api_keys": api_keys(), "throttle_time_ms": 0}
