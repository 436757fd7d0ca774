"""Produce: validate each partition's batches, check producer sequences, append.

acks=0 gets no response at all; acks=1 and acks=-1 are answered after the local append,
which with one broker is also when the high watermark moves. Replication will make
acks=-1 wait for the ISR instead. Versions 0-2 (old message formats) are advertised so
that clients probing for overlap find Produce, but answered with UNSUPPORTED_VERSION
(docs/contracts/wire-protocol.md).
"""

from __future__ import annotations

from broker.protocol.apis import PRODUCE_API
from broker.protocol.errors import ErrorCode
from broker.records.validate import RecordsError, validate_produce_records
from broker.server.handlers.base import NO_RESPONSE, ApiHandler


def _partition_response(
    index: int,
    code: ErrorCode,
    base_offset: int = -1,
    log_start: int = -1,
    message: str | None = None,
    log_append_time_ms: int = -1,
) -> dict:
    return {
        "index": index,
        "error_code": code,
        "base_offset": base_offset,
        "log_append_time_ms": log_append_time_ms,
        "log_start_offset": log_start,
        "record_errors": [],
        "error_message": message,
    }


def handle(broker, request, body: dict):
    acks = body["acks"]
    now = broker.now_ms()
    responses = []
    for topic in body["topic_data"]:
        name = topic["name"]
        partitions = []
        for pdata in topic["partition_data"]:
            partitions.append(
                _produce_partition(broker, name, pdata, acks, now, request.api_version)
            )
        responses.append({"name": name, "partition_responses": partitions})
    if acks == 0:
        return NO_RESPONSE
    return {"responses": responses, "throttle_time_ms": 0}


def _produce_partition(broker, topic: str, pdata: dict, acks: int, now: int, version: int) -> dict:
    index = pdata["index"]
    if acks not in (0, 1, -1):
        return _partition_response(index, ErrorCode.INVALID_REQUIRED_ACKS)
    partition = broker.replicas.get(topic, index)
    if partition is None:
        return _partition_response(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    records = pdata["records"] or b""  # null or empty: INVALID_RECORD, as Kafka
    try:
        batches = validate_produce_records(
            records,
            partition.log.config.max_message_bytes,
            produce_version=version,
            parse_every_record=broker.config["produce.record.validation"] == "full",
        )
    except RecordsError as exc:
        return _partition_response(index, ErrorCode(exc.error_code), message=str(exc))
    result = partition.append_as_leader(bytearray(records), batches, now)
    if result.error != ErrorCode.NONE:
        return _partition_response(index, result.error, message=result.message)
    return _partition_response(
        index,
        ErrorCode.NONE,
        result.base_offset,
        partition.log.log_start_offset,
        log_append_time_ms=result.log_append_time_ms,
    )


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "responses": [
            {
                "name": t["name"],
                "partition_responses": [
                    _partition_response(p["index"], code) for p in t["partition_data"]
                ],
            }
            for t in body["topic_data"]
        ],
        "throttle_time_ms": 0,
    }


HANDLER = ApiHandler(PRODUCE_API, handle, error_response, accepted_from=3)
