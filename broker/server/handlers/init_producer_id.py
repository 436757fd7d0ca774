"""InitProducerId for idempotent (non-transactional) producers.

Transactions are not implemented: a transactional id is refused rather than silently
treated as idempotent-only, since the client would then believe in guarantees it lacks.
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode


def handle(ctx, header, request: dict) -> dict:
    if request.get("transactional_id"):
        return error_response(request, ErrorCode.INVALID_REQUEST)
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "producer_id": ctx.producer_ids.allocate(),
        "producer_epoch": 0,
    }


def error_response(request: dict, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
