"""ListOffsets: -1 latest (the high watermark), -2 earliest (the log start), -3 the record
with the largest timestamp (KIP-734, v7+), T >= 0 the first record whose timestamp is at
least T. Lookups by time answer per record and only below the high watermark; none found
is offset -1."""

from __future__ import annotations

from broker.protocol.apis import LIST_OFFSETS_API
from broker.protocol.errors import ErrorCode
from broker.server.handlers.base import ApiHandler

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


def _answer(index: int, code: ErrorCode, offset: int = -1, timestamp: int = -1, epoch: int = -1):
    return {
        "partition_index": index,
        "error_code": code,
        "timestamp": timestamp,
        "offset": offset,
        "leader_epoch": epoch,
    }


def _partition(broker, topic: str, req: dict) -> dict:
    index = req["partition_index"]
    partition = broker.replicas.get(topic, index)
    if partition is None:
        return _answer(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    current_epoch = req.get("current_leader_epoch", -1)
    if current_epoch >= 0 and current_epoch != partition.leader_epoch:
        if current_epoch < partition.leader_epoch:
            return _answer(index, ErrorCode.FENCED_LEADER_EPOCH)
        return _answer(index, ErrorCode.UNKNOWN_LEADER_EPOCH)
    ts, epoch, hw = req["timestamp"], partition.leader_epoch, partition.high_watermark
    if ts == LATEST:
        return _answer(index, ErrorCode.NONE, hw, epoch=epoch)
    if ts == EARLIEST:
        return _answer(index, ErrorCode.NONE, partition.log.log_start_offset, epoch=epoch)
    if ts == MAX_TIMESTAMP:
        found = partition.log.max_timestamp_and_offset(max_offset=hw)
    elif ts >= 0:
        found = partition.log.offset_for_timestamp(ts, max_offset=hw)
    else:  # -4/-5 are about tiered storage, which has no meaning here
        return _answer(index, ErrorCode.INVALID_REQUEST)
    if found is None:  # Kafka's "unknown offset": -1 everywhere, the epoch too
        return _answer(index, ErrorCode.NONE)
    return _answer(index, ErrorCode.NONE, found[0], found[1], epoch)


def handle(broker, request, body: dict) -> dict:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t["name"],
                "partitions": [_partition(broker, t["name"], p) for p in t["partitions"]],
            }
            for t in body["topics"]
        ],
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t["name"],
                "partitions": [_answer(p["partition_index"], code) for p in t["partitions"]],
            }
            for t in body["topics"]
        ],
    }


HANDLER = ApiHandler(LIST_OFFSETS_API, handle, error_response)
