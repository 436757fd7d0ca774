"""ListOffsets: -1 latest (the high watermark), -2 earliest, T >= 0 the first offset
whose timestamp is at least T (-1 when there is none)."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode

LATEST, EARLIEST = -1, -2


def _partition(ctx, topic: str, req: dict) -> dict:
    out = {
        "partition_index": req["partition_index"],
        "error_code": ErrorCode.NONE,
        "timestamp": -1,
        "offset": -1,
        "leader_epoch": -1,
        "old_style_offsets": [],
    }
    partition = ctx.replicas.get(topic, req["partition_index"])
    if partition is None:
        out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return out
    current_epoch = req.get("current_leader_epoch", -1)
    if current_epoch >= 0 and current_epoch != partition.leader_epoch:
        out["error_code"] = (
            ErrorCode.FENCED_LEADER_EPOCH
            if current_epoch < partition.leader_epoch
            else ErrorCode.UNKNOWN_LEADER_EPOCH
        )
        return out
    ts = req["timestamp"]
    out["leader_epoch"] = partition.leader_epoch
    if ts == LATEST:
        out["offset"] = partition.high_watermark
    elif ts == EARLIEST:
        out["offset"] = partition.log.log_start_offset
    elif ts < 0:
        out["error_code"] = ErrorCode.INVALID_REQUEST  # e.g. max-timestamp (-3) is not implemented
    else:
        found = partition.log.offset_for_timestamp(ts)
        if found is not None and found[0] < partition.high_watermark:
            out["offset"], out["timestamp"] = found
    return out


def handle(ctx, header, request: dict) -> dict:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t["name"],
                "partitions": [_partition(ctx, t["name"], p) for p in t["partitions"]],
            }
            for t in request["topics"]
        ],
    }


def error_response(request: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition_index": p["partition_index"],
                        "error_code": code,
                        "timestamp": -1,
                        "offset": -1,
                        "leader_epoch": -1,
                        "old_style_offsets": [],
                    }
                    for p in t["partitions"]
                ],
            }
            for t in request["topics"]
        ],
    }
