"""What the broker checks in the `records` bytes of one partition of a Produce request.

The checks and their error codes follow Kafka (4.0) so clients react as they would
against it; where Kafka has no clean answer we choose one. The order matters only
for which error a request with several faults gets, and follows Kafka's order:
the request-level checks (ProduceRequest.validateRecords), then the log's
(UnifiedLog.analyzeAndValidateRecords), then LogValidator's.
See README.md in this directory for the reasoning behind each choice.
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.records.batch import MAGIC_V2, CorruptRecordError, check_record_framing, parse_records
from broker.records.compression import DEFAULT_MAX_SIZE, CompressionError, decompress
from broker.records.header import (
    CODEC_NONE,
    CODEC_ZSTD,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_POS,
    MIN_BATCH_LENGTH,
    BatchHeader,
    crc_is_valid,
    parse_header,
    read_offset_and_length,
)
from broker.records.spans import scan_records

# Kafka's batch iterator refuses a batchLength below the smallest v0 message
# (LegacyRecord.RECORD_OVERHEAD_V0) before it even looks at the magic.
_LEGACY_MIN_LENGTH = 14
# The first zstd-capable Produce version.
_PRODUCE_ZSTD_MIN_VERSION = 7


class RecordsError(Exception):
    """A produced records blob Kafka would refuse, with the error code it would answer."""

    def __init__(
        self, error_code: int, message: str, record_errors: list[tuple[int, str]] = ()
    ) -> None:
        super().__init__(message)
        self.error_code = int(error_code)
        self.message = message
        # (index of the record in its batch, why it was refused): Produce v8+ answers them.
        self.record_errors = list(record_errors)

    def __repr__(self) -> str:
        return f"RecordsError({self.error_code}, {self.message!r})"


def validate_produce_records(
    buf: bytes,
    max_batch_bytes: int,
    *,
    max_uncompressed_bytes: int = DEFAULT_MAX_SIZE,
    produce_version: int | None = None,
    parse_every_record: bool = False,
    compacted: str | None = None,
) -> list[tuple[int, BatchHeader]]:
    """Check one partition's records from Produce v3+; returns [(position, header)].

    Kafka allows exactly one v2 batch per partition in Produce v3+, so the list has
    one entry; it is a list so callers need not change if that ever relaxes.
    Raises RecordsError carrying the Kafka error code. `produce_version`, when given,
    refuses zstd below Produce v7 as Kafka does; `max_uncompressed_bytes` bounds the
    decompression done to check the records of a compressed batch. With
    `parse_every_record` each record's fields are decoded (Kafka's LogValidator does);
    otherwise only the record framing is walked (see README: record validation).
    `compacted` names the topic partition when its topic is compacted: a record without
    a key is then refused (INVALID_RECORD, as Kafka's LogValidator).
    """
    view = memoryview(buf)
    end = len(view)
    if end == 0:
        raise RecordsError(
            ErrorCode.INVALID_RECORD, "Produce requests must have at least one record batch"
        )
    if end < MAGIC_POS + 1:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, f"truncated record batch: {end} bytes")
    _, length = read_offset_and_length(view, 0)
    if length < _LEGACY_MIN_LENGTH:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, f"record batch size {length} is too small")
    magic = view[MAGIC_POS]
    if magic in (0, 1):
        raise RecordsError(
            ErrorCode.INVALID_RECORD,
            "Produce requests are only allowed to contain record batches with magic version 2",
        )
    if magic != MAGIC_V2:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, f"invalid magic {magic}")
    if length < MIN_BATCH_LENGTH:
        raise RecordsError(
            ErrorCode.CORRUPT_MESSAGE, f"record batch size {length} is below the v2 header size"
        )
    size = LOG_OVERHEAD + length
    if size > end:
        raise RecordsError(
            ErrorCode.CORRUPT_MESSAGE,
            f"truncated record batch: {size} bytes declared, {end} present",
        )
    if size < end:
        rest = end - size
        if rest >= LOG_OVERHEAD and LOG_OVERHEAD + read_offset_and_length(view, size)[1] <= rest:
            raise RecordsError(
                ErrorCode.INVALID_RECORD,
                "Produce requests are only allowed to contain exactly one record batch per partition",
            )
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, f"{rest} stray bytes after the record batch")

    header = parse_header(view, 0)
    if (
        produce_version is not None
        and produce_version < _PRODUCE_ZSTD_MIN_VERSION
        and header.codec == CODEC_ZSTD
    ):
        raise RecordsError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"Produce requests with version {produce_version} are not allowed to use ZStandard compression",
        )
    if header.base_offset != 0:
        raise RecordsError(
            ErrorCode.INVALID_RECORD,
            f"The baseOffset of the record batch should be 0, but it is {header.base_offset}",
        )
    if size > max_batch_bytes:
        raise RecordsError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"The record batch size is {size} bytes which exceeds the maximum configured value of {max_batch_bytes}.",
        )
    if not crc_is_valid(view, 0, header):
        raise RecordsError(
            ErrorCode.CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {header.crc})"
        )
    _check_batch_fields(header)
    _check_records(view, header, max_uncompressed_bytes, parse_every_record, compacted)
    return [(0, header)]


def _check_batch_fields(header: BatchHeader) -> None:
    """LogValidator.validateBatch, for batches from clients."""
    if header.last_offset_delta < 0:
        raise RecordsError(
            ErrorCode.INVALID_RECORD,
            f"Batch has an invalid offset range: delta {header.last_offset_delta}",
        )
    if header.records_count <= 0:
        raise RecordsError(
            ErrorCode.INVALID_RECORD,
            f"Invalid reported count for record batch: {header.records_count}",
        )
    if header.last_offset_delta + 1 != header.records_count:
        raise RecordsError(
            ErrorCode.INVALID_RECORD,
            f"Inconsistent batch offset range [0, {header.last_offset_delta}] and count of records {header.records_count}",
        )
    if header.is_control:
        raise RecordsError(
            ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records"
        )
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise RecordsError(
            ErrorCode.INVALID_RECORD,
            f"Invalid sequence number {header.base_sequence} in record batch with producerId {header.producer_id}",
        )
    if header.codec > CODEC_ZSTD:
        raise RecordsError(ErrorCode.INVALID_RECORD, f"Unknown compression codec {header.codec}")


def _check_records(
    view: memoryview,
    header: BatchHeader,
    max_uncompressed: int,
    parse_every_record: bool,
    compacted: str | None,
) -> None:
    """Kafka reads every record of a produced batch; a batch its consumers cannot read
    must not reach the log, since we store it as produced and serve it to everyone."""
    data = view[HEADER_SIZE : header.size]
    try:
        if header.codec == CODEC_NONE:
            records = data
        else:
            records = decompress(header.codec, data, max_uncompressed)
        if parse_every_record:
            parse_records(bytes(records), header.records_count)
        elif compacted is None:
            check_record_framing(records, header.records_count)
        if compacted is not None:
            spans = scan_records(bytes(records), header.records_count)
    except (CompressionError, CorruptRecordError) as exc:
        raise RecordsError(ErrorCode.INVALID_RECORD, f"Found invalid record set: {exc}") from exc
    if compacted is not None:
        _check_keys(spans, compacted)


def _check_keys(spans, partition_name: str) -> None:
    """A compacted topic keeps the latest record per key: a record without one cannot
    be kept (Kafka's words and code: INVALID_RECORD, one record error per record)."""
    message = (
        f"Compacted topic cannot accept message without key in topic partition {partition_name}."
    )
    errors = [(i, message) for i, span in enumerate(spans) if span[6] is None]  # no key
    if errors:
        shown = ", ".join(f"record {i}: {text}" for i, text in errors[:3])
        raise RecordsError(
            ErrorCode.INVALID_RECORD,
            f"One or more records have been rejected due to {len(errors)} record errors in "
            f"total, and only showing the first three errors at most: [{shown}]",
            errors,
        )
