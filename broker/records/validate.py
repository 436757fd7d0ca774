"""What the broker checks in the `records` bytes of one partition of a Produce request.

The checks and their error codes follow Kafka (4.0) so clients react as they would
against it; where Kafka has no clean answer we choose one. The order matters only
for which error a request with several faults gets, and follows Kafka's order:
the request-level checks (ProduceRequest.validateRecords), then the log's
(UnifiedLog.analyzeAndValidateRecords), then LogValidator's.
See README.md in this directory for the reasoning behind each choice.
"""

from __future__ import annotations

from typing import NamedTuple

from broker.protocol.errors import ErrorCode
from broker.records.batch import MAGIC_V2, CorruptRecordError, check_record_framing, parse_records
from broker.records.compression import DEFAULT_MAX_SIZE, CompressionError, decompress
from broker.records.header import (
    CODEC_MASK,
    CODEC_NONE,
    CODEC_ZSTD,
    CONTROL,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_POS,
    MIN_BATCH_LENGTH,
    BatchHeader,
    crc_is_valid,
    parse_header,
    read_offset_and_length,
)
from broker.records.log_validator import AppendRules, recompress, refused_records
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


class Validated(NamedTuple):
    """A produced partition's records ready to append: the request's bytes, or the batch
    rebuilt with the topic's codec; and [(position, header)] of its batch."""

    records: bytes | bytearray
    batches: list[tuple[int, BatchHeader]]


def validate_produce_records(
    buf: bytes,
    max_batch_bytes: int,
    *,
    max_uncompressed_bytes: int = DEFAULT_MAX_SIZE,
    produce_version: int | None = None,
    parse_every_record: bool = False,
) -> list[tuple[int, BatchHeader]]:
    """`validate_append` with the default rules (no key, timestamp or codec rule):
    [(position, header)] of the one batch."""
    return validate_append(
        buf,
        max_batch_bytes,
        AppendRules(),
        0,
        max_uncompressed_bytes=max_uncompressed_bytes,
        produce_version=produce_version,
        parse_every_record=parse_every_record,
    ).batches


def validate_append(
    buf: bytes,
    max_batch_bytes: int,
    rules: AppendRules,
    now_ms: int,
    *,
    max_uncompressed_bytes: int = DEFAULT_MAX_SIZE,
    produce_version: int | None = None,
    parse_every_record: bool = False,
    partition_name: str = "",
) -> Validated:
    """Check one partition's records from Produce v3+ and apply the topic's `rules`
    (log_validator.py: keys, CreateTime window at `now_ms`, compression.type).

    Kafka allows exactly one v2 batch per partition in Produce v3+, so `batches` has
    one entry; it is a list so callers need not change if that ever relaxes.
    Raises RecordsError carrying the Kafka error code. `produce_version`, when given,
    refuses zstd below Produce v7 as Kafka does; `max_uncompressed_bytes` bounds the
    decompression done to check the records of a compressed batch. With
    `parse_every_record` each record's fields are decoded (Kafka's LogValidator does);
    otherwise only the record framing is walked (see README: record validation).
    `partition_name` ("topic-partition") is named in record errors.
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
    rebuilt = _check_records(
        view, header, max_uncompressed_bytes, parse_every_record, rules, now_ms, partition_name
    )
    if rebuilt is None:
        return Validated(buf, [(0, header)])  # as produced: the fast path
    batch, header = rebuilt
    if header.size > max_batch_bytes:
        # Checked again after recompression, as Kafka's log does for a rebuilt batch.
        raise RecordsError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"Message batch size is {header.size} bytes after recompression, which exceeds "
            f"the maximum configured size of {max_batch_bytes}.",
        )
    return Validated(batch, [(0, header)])


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
    if header.attributes & CONTROL:  # (the properties is_control and codec cost a call)
        raise RecordsError(
            ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records"
        )
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise RecordsError(
            ErrorCode.INVALID_RECORD,
            f"Invalid sequence number {header.base_sequence} in record batch with producerId {header.producer_id}",
        )
    if (header.attributes & CODEC_MASK) > CODEC_ZSTD:
        raise RecordsError(ErrorCode.INVALID_RECORD, f"Unknown compression codec {header.codec}")


def _check_records(
    view: memoryview,
    header: BatchHeader,
    max_uncompressed: int,
    parse_every_record: bool,
    rules: AppendRules,
    now_ms: int,
    partition_name: str,
) -> tuple[bytes, BatchHeader] | None:
    """Kafka reads every record of a produced batch; a batch its consumers cannot read
    must not reach the log, since we store it as produced and serve it to everyone.
    One pass over the (decompressed) records serves the framing, the topic's per-record
    rules and, when the codec must change, the rebuilt batch (returned; else None)."""
    data = view[HEADER_SIZE : header.size]
    walk = rules.needs_records(header)
    spans = None
    try:
        if header.codec == CODEC_NONE:
            records = data
        else:
            records = decompress(header.codec, data, max_uncompressed)
        if parse_every_record:
            parse_records(bytes(records), header.records_count)
        elif not walk:
            check_record_framing(records, header.records_count)
        if walk:
            records = bytes(records)
            spans = scan_records(records, header.records_count)
    except (CompressionError, CorruptRecordError) as exc:
        raise RecordsError(ErrorCode.INVALID_RECORD, f"Found invalid record set: {exc}") from exc
    if not walk:
        # The default rules' fast path: the batch is appended as produced.
        if rules.checks_batch_header:
            refusal = refused_records(header, None, rules, now_ms, partition_name)
            if refusal is not None:
                raise RecordsError(*refusal)
        return None
    refusal = refused_records(header, spans, rules, now_ms, partition_name)
    if refusal is not None:
        raise RecordsError(*refusal)
    codec = rules.target_codec(header)
    if codec == header.codec:
        return None
    return recompress(header, records, spans, codec, rules.level)
