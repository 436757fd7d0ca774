"""What the leader does to a produced batch's records before it appends them, as Kafka's
LogValidator does: per-record checks (a key on compacted topics, CreateTime timestamps
inside the topic's window) and recompression to the topic's `compression.type`.

Pure functions of the batch's bytes, the topic's rules and the leader's clock; the
structural checks before them are validate.py's, the offsets after them log.py's.
Followers copy the leader's batches and never come here. The contract (what is
recompressed, what a rebuilt batch keeps, which error a refusal gets):
docs/contracts/log.md, "Append validation".
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.protocol.errors import ErrorCode
from broker.records.compression import compress
from broker.records.header import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_MASK,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    TIMESTAMP_TYPE_LOG_APPEND,
    BatchHeader,
)
from broker.records.rewrite import framed
from broker.records.spans import RecordSpan
from broker.records.varint import decode_zigzag, encode_zigzag, zigzag

# compression.type's values (Kafka's BrokerCompressionType names) and the codec each
# stores; `producer` stores the batch's own.
PRODUCER = "producer"
COMPRESSION_TYPES = {
    "uncompressed": CODEC_NONE,
    "gzip": CODEC_GZIP,
    "snappy": CODEC_SNAPPY,
    "lz4": CODEC_LZ4,
    "zstd": CODEC_ZSTD,
    PRODUCER: None,
}
# KIP-390's levels: gzip -1 (zlib's default) or 1..9, lz4 1..17, zstd -131072..22.
GZIP_LEVELS, LZ4_LEVELS, ZSTD_LEVELS = (1, 9), (1, 17), (-131072, 22)
GZIP_DEFAULT_LEVEL, LZ4_DEFAULT_LEVEL, ZSTD_DEFAULT_LEVEL = -1, 9, 3
# Kafka's Long.MAX_VALUE: the timestamp windows' "no limit".
LONG_MAX = 2**63 - 1
# A record with this timestamp has none (Kafka's RecordBatch.NO_TIMESTAMP): never refused.
NO_TIMESTAMP = -1


# Why a batch's records are refused: the partition's error code and message, and (index
# in the batch, why) per refused record, which Produce v8+ answers.
Refusal = tuple[ErrorCode, str, list[tuple[int, str]]]


@dataclass(frozen=True)
class AppendRules:
    """The topic's settings that act on a produced batch's records."""

    # The codec to store batches with; None keeps the producer's.
    codec: int | None = None
    # The `level` argument of compression.compress for that codec (None: its default).
    level: int | None = None
    # A CreateTime record more than this before / after the leader's clock is refused.
    before_max_ms: int = LONG_MAX
    after_max_ms: int = LONG_MAX
    # message.timestamp.type=LogAppendTime: timestamps are the broker's, not checked.
    log_append_time: bool = False
    # cleanup.policy includes compact: every record needs a key.
    compacted: bool = False

    @property
    def checks_timestamps(self) -> bool:
        return not self.log_append_time and (
            self.before_max_ms < LONG_MAX or self.after_max_ms < LONG_MAX
        )

    def target_codec(self, header: BatchHeader) -> int:
        """The codec `header`'s batch is stored with. A control batch written uncompressed
        stays so (Kafka never compresses those)."""
        if self.codec is None or (header.is_control and header.codec == CODEC_NONE):
            return header.codec
        return self.codec

    def needs_records(self, header: BatchHeader) -> bool:
        """Whether the records must be walked one by one (not only framed): keys,
        timestamps or a rebuild. False for the default rules, which keep the fast path."""
        if self.compacted or self.checks_timestamps:
            return True
        return self.codec is not None and self.target_codec(header) != header.codec

    @property
    def checks_batch_header(self) -> bool:
        """Whether a batch that is not walked still needs refused_records (the producer's
        LogAppendTime mark in a LogAppendTime topic)."""
        return self.log_append_time


def gzip_level_problem(level: int) -> str | None:
    """What is wrong with a compression.gzip.level, or None."""
    low, high = GZIP_LEVELS
    if level == GZIP_DEFAULT_LEVEL or low <= level <= high:
        return None
    return f"value must be between {low} and {high}, or {GZIP_DEFAULT_LEVEL}"


def compression_level(codec: int | None, gzip: int, lz4: int, zstd: int) -> int | None:
    """compress()'s level for `codec` from the KIP-390 levels. Kafka's lz4 default level
    (9) uses the fast compressor and every other level the high-compression one, as
    compress() does with None and a number; gzip's -1 is zlib's default."""
    if codec == CODEC_GZIP and gzip != GZIP_DEFAULT_LEVEL:
        return gzip
    if codec == CODEC_LZ4 and lz4 != LZ4_DEFAULT_LEVEL:
        return lz4
    if codec == CODEC_ZSTD:
        return zstd
    return None


def refused_records(
    header: BatchHeader,
    spans: list[RecordSpan] | None,
    rules: AppendRules,
    now_ms: int,
    partition_name: str,
) -> Refusal | None:
    """LogValidator's per-record checks: None, or the Refusal naming every refused record.

    A record without a key in a compacted topic is INVALID_RECORD; else a CreateTime
    timestamp outside [now - before, now + after] is INVALID_TIMESTAMP, and so is every
    record of a batch the producer marked LogAppendTime in a LogAppendTime topic (only
    the broker sets that). With any timestamp error the partition's error is
    INVALID_TIMESTAMP, else INVALID_RECORD (Kafka's processRecordErrors). `spans` may
    be None when the rules need no record (`needs_records` false)."""
    errors: list[tuple[int, str]] = []
    timestamp_refused = False
    producer_set_append_time = bool(header.attributes & TIMESTAMP_TYPE_LOG_APPEND)
    if rules.log_append_time and producer_set_append_time:
        message = (
            "Invalid timestamp type in message: producer should not set timestamp type to "
            "LogAppendTime."
        )
        errors = [(i, message) for i in range(header.records_count)]
        timestamp_refused = True
    elif spans is not None:
        low, high = now_ms - rules.before_max_ms, now_ms + rules.after_max_ms
        checks_timestamps = rules.checks_timestamps
        no_key = (
            f"Compacted topic cannot accept message without key in topic partition "
            f"{partition_name}."
        )
        base = header.base_timestamp
        for i, span in enumerate(spans):
            if rules.compacted and span[6] is None:  # key
                errors.append((i, no_key))
            elif checks_timestamps:
                # Every record of a LogAppendTime batch reads the batch's maxTimestamp.
                timestamp = header.max_timestamp if producer_set_append_time else base + span[5]
                if timestamp != NO_TIMESTAMP and not low <= timestamp <= high:
                    timestamp_refused = True
                    errors.append(
                        (
                            i,
                            f"Timestamp {timestamp} of message with offset {span[4]} is out of "
                            f"range. The timestamp should be within [{low}, {high}]",
                        )
                    )
    if not errors:
        return None
    if timestamp_refused:
        return (
            ErrorCode.INVALID_TIMESTAMP,
            "One or more records have been rejected due to invalid timestamp",
            errors,
        )
    shown = ", ".join(f"record {i}: {text}" for i, text in errors[:3])
    return (
        ErrorCode.INVALID_RECORD,
        f"One or more records have been rejected due to {len(errors)} record errors in "
        f"total, and only showing the first three errors at most: [{shown}]",
        errors,
    )


def recompress(
    header: BatchHeader, records: bytes, spans: list[RecordSpan], codec: int, level: int | None
) -> tuple[bytes, BatchHeader]:
    """The batch `header` heads, its (uncompressed) `records` stored with `codec`: what
    Kafka's builder writes when source and target codec differ. Kept: baseOffset,
    partitionLeaderEpoch, producer id, epoch and base sequence, the transactional and
    control flags, the timestamp type, baseTimestamp and each record's bytes (its
    timestamp, key, value, headers). Rewritten: the codec bits, maxTimestamp (the largest
    record timestamp, as the builder computes it; LogAppendTime is stamped at append) and
    offset deltas that are not 0, 1, 2, ... (the builder numbers records in order)."""
    if any(span[4] != i for i, span in enumerate(spans)):
        records = _renumber(records, spans)
    attributes = (header.attributes & ~CODEC_MASK) | codec
    max_timestamp = header.max_timestamp
    if not header.attributes & TIMESTAMP_TYPE_LOG_APPEND and spans:
        max_timestamp = header.base_timestamp + max(span[5] for span in spans)
    section = compress(codec, records, level) if codec != CODEC_NONE else bytes(records)
    return framed(header, section, attributes=attributes, max_timestamp=max_timestamp)


def _renumber(records: bytes, spans: list[RecordSpan]) -> bytes:
    """`records` with each record's offsetDelta set to its position in the batch."""
    out = bytearray()
    for i, span in enumerate(spans):
        attributes_at, timestamp_end, end = span[1], span[2], span[3]
        _, after_offset = decode_zigzag(records, timestamp_end, end)
        body = records[attributes_at:timestamp_end] + encode_zigzag(i) + records[after_offset:end]
        out += zigzag(len(body))
        out += body
    return bytes(out)
