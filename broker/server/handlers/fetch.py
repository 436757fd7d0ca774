"""Fetch: file regions of whole batches below the high watermark.

Long polling stays sans-I/O: `handle` returns None when fewer than min_bytes are
available and the wait is not over; the network layer calls it again when a partition
is appended to or when max_wait_ms expires (then with final=True, which always answers).
"""

from __future__ import annotations

from broker.log.log import OffsetOutOfRange
from broker.protocol.errors import ErrorCode


def _empty(index: int, code: ErrorCode, hw: int = -1, log_start: int = -1) -> dict:
    return {
        "partition_index": index,
        "error_code": code,
        "high_watermark": hw,
        "last_stable_offset": hw,
        "log_start_offset": log_start,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": None if code else b"",
    }


def handle(ctx, header, request: dict, final: bool = True) -> dict | None:
    """The response, or None to wait for more data (only when final is False)."""
    remaining = request.get("max_bytes", 0x7FFFFFFF)
    min_bytes = request["min_bytes"]
    total = 0
    any_error = False
    responses = []
    for topic in request["topics"]:
        name = topic["topic"]
        partitions = []
        for preq in topic["partitions"]:
            entry = _fetch_partition(ctx, name, preq, remaining, first=(total == 0))
            size = sum(len(r) for r in entry["records"] or ())
            total += size
            remaining = max(0, remaining - size)
            any_error |= entry["error_code"] != ErrorCode.NONE
            partitions.append(entry)
        responses.append({"topic": name, "partitions": partitions})
    if not final and total < min_bytes and not any_error:
        return None
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "session_id": 0,
        "responses": responses,
    }


def _fetch_partition(ctx, topic: str, preq: dict, remaining: int, first: bool) -> dict:
    index = preq["partition"]
    partition = ctx.replicas.get(topic, index)
    if partition is None:
        return _empty(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    epoch = preq.get("current_leader_epoch", -1)
    if epoch >= 0 and epoch != partition.leader_epoch:
        code = (
            ErrorCode.FENCED_LEADER_EPOCH
            if epoch < partition.leader_epoch
            else ErrorCode.UNKNOWN_LEADER_EPOCH
        )
        return _empty(index, code)
    hw, log_start = partition.high_watermark, partition.log.log_start_offset
    offset = preq["fetch_offset"]
    # Between the high watermark and the log end is not out of range: just nothing yet.
    if partition.log.log_end_offset >= offset >= hw:
        return _empty(index, ErrorCode.NONE, hw, log_start)
    limit = min(preq["partition_max_bytes"], remaining)
    if limit <= 0 and not first:
        return _empty(index, ErrorCode.NONE, hw, log_start)
    try:
        # KIP-74: the first batch of the response comes whole even past the limits.
        result = partition.log.read(offset, max(limit, 1), max_offset=hw)
    except OffsetOutOfRange:
        return _empty(index, ErrorCode.OFFSET_OUT_OF_RANGE, hw, log_start)
    entry = _empty(index, ErrorCode.NONE, hw, log_start)
    entry["records"] = result.regions
    return entry


def partitions_of(request: dict) -> list[tuple[str, int]]:
    """The partitions whose appends should wake a parked fetch."""
    return [(t["topic"], p["partition"]) for t in request["topics"] for p in t["partitions"]]


def error_response(request: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "session_id": 0,
        "responses": [
            {
                "topic": t["topic"],
                "partitions": [_empty(p["partition"], code) for p in t["partitions"]],
            }
            for t in request["topics"]
        ],
    }
