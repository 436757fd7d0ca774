"""Rewriting a stored batch with some of its records (the log cleaner), as Kafka's
cleaner does (MemoryRecords.filterTo):

- the batch keeps its baseOffset and lastOffsetDelta, so its offset range, and with it
  the producer's last sequence, stays the same however many records go;
- it keeps partitionLeaderEpoch, producer id, epoch, base sequence, the transactional
  and control flags, and its codec (a compressed batch is recompressed);
- each kept record is copied byte for byte: its offset delta and timestamp delta still
  hold against the unchanged baseOffset and baseTimestamp (Kafka's builder moves
  baseTimestamp to the first kept record; the record timestamps are the same either
  way, and copying avoids re-encoding every record);
- maxTimestamp becomes the largest kept timestamp (LogAppendTime batches keep theirs);
- a delete horizon (KIP-534) is stored as Kafka stores it: attribute bit 6 set and
  baseTimestamp = the horizon, every kept record's timestamp delta re-encoded against it.

`empty_batch` is Kafka's empty batch header: the offsets, producer fields and max
timestamp of a batch none of whose records remain, no records, no codec.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.records.batch import MAGIC_V2
from broker.records.compression import compress
from broker.records.header import (
    CODEC_MASK,
    CODEC_NONE,
    DELETE_HORIZON,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_LOG_APPEND,
    BatchHeader,
    compute_crc,
    set_crc,
    write_header,
)
from broker.records.spans import RecordSpan
from broker.records.varint import encode_zigzag, zigzag


def delete_horizon(header: BatchHeader) -> int | None:
    """The batch's delete horizon (ms): its tombstones may go from then on."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON else None


def rebuild_batch(
    header: BatchHeader,
    records: bytes,
    kept: Sequence[RecordSpan],
    horizon: int | None = None,
) -> bytes:
    """The batch `header` heads, holding only the `kept` spans of its uncompressed
    `records` section (at least one). With `horizon`, the batch gets that delete
    horizon; a batch that already has one keeps it."""
    if not kept:
        raise ValueError("a rebuilt batch keeps at least one record")
    attributes = header.attributes
    log_append_time = bool(attributes & TIMESTAMP_TYPE_LOG_APPEND)
    base_timestamp = header.base_timestamp
    if log_append_time:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = base_timestamp + max(span[5] for span in kept)  # timestamp_delta
    if horizon is None or attributes & DELETE_HORIZON:
        body = b"".join([records[span[0] : span[3]] for span in kept])  # start:end
    else:
        attributes |= DELETE_HORIZON
        body = _rebase_timestamps(records, kept, base_timestamp, horizon, log_append_time)
        base_timestamp = horizon
    codec = attributes & CODEC_MASK
    return framed(
        header,
        compress(codec, body) if codec != CODEC_NONE else body,
        attributes=attributes,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        records_count=len(kept),
    )[0]


def framed(header: BatchHeader, section: bytes, **changes) -> tuple[bytes, BatchHeader]:
    """`header` with `changes`, its length and CRC made right for `section`, then
    `section`; and the header as written (the cleaner's rebuilds and the leader's
    recompression both frame batches here)."""
    size = HEADER_SIZE + len(section)
    out = bytearray(HEADER_SIZE)
    out += section
    written = header._replace(batch_length=size - LOG_OVERHEAD, magic=MAGIC_V2, crc=0, **changes)
    write_header(out, 0, written)
    crc = compute_crc(out, 0, size)
    set_crc(out, 0, crc)
    return bytes(out), written._replace(crc=crc)


def _rebase_timestamps(
    records: bytes,
    kept: Sequence[RecordSpan],
    old_base: int,
    new_base: int,
    log_append_time: bool,
) -> bytes:
    """The kept records with their timestamp deltas taken against `new_base` (a
    LogAppendTime batch's records all read the batch's maxTimestamp: their deltas stay)."""
    out = bytearray()
    for start, attributes_at, timestamp_end, end, _, timestamp_delta, _, _ in kept:
        if log_append_time:
            out += records[start:end]
            continue
        delta = old_base + timestamp_delta - new_base
        body = (
            records[attributes_at : attributes_at + 1]
            + encode_zigzag(delta)
            + records[timestamp_end:end]
        )
        out += zigzag(len(body))
        out += body
    return bytes(out)


def empty_batch(header: BatchHeader) -> bytes:
    """The header of `header`'s batch with no records left (Kafka's writeEmptyHeader):
    same offsets, leader epoch and producer fields; no codec, no delete horizon; both
    timestamps the batch's maxTimestamp."""
    return framed(
        header,
        b"",
        attributes=header.attributes & ~(CODEC_MASK | DELETE_HORIZON),
        base_timestamp=header.max_timestamp,
        records_count=0,
    )[0]
