"""Fetched record batches as Arrow columns: offsets, timestamps, keys and values.

``batch.iter_records`` gives one ``Record`` per record, which costs about 5 µs a record
in CPython, most of a load task's time. For a reader that wants columns anyway (the
hourly load), ``fetched_columns`` walks the framing once and reads the fields of every
record at once with Arrow kernels:

1. Batches are walked by their headers (``iter_batches``: a partial trailing batch ends
   the walk, as a fetch may end mid-batch); control batches and batches wholly outside
   ``[start, end)`` are passed over; every other batch's CRC is checked and its records
   section decompressed once. The sections are joined into one buffer.
2. The only serial step, in Python: each batch's ``recordsCount`` length prefixes are
   walked to find where every record starts (about 0.13 µs a record: two byte reads and
   an append).
3. Everything else is per field, for all records together (``vectorized.Rows``): the
   length is read again and must match, then attributes, timestampDelta, offsetDelta,
   key and value (nullable bytes, copied out with one memcpy each), and headers (counted
   and stepped over, not returned). Every record must end exactly at its length.

A batch whose CRC, compression or record framing is wrong raises ``CorruptRecordError``
naming its base offset (the precise reason comes from ``parse_records`` of that batch),
as ``iter_records`` does: nothing in it can be trusted, and the caller (a load task)
fails rather than load or skip part of it. Header keys are not checked for UTF-8 here
(they are not returned).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from broker.records.batch import (
    CorruptRecordError,
    Record,
    check_batch,
    iter_batches,
    parse_records,
)
from broker.records.compression import DEFAULT_MAX_SIZE, CompressionError, decompress
from broker.records.header import (
    CODEC_NONE,
    CONTROL,
    HEADER_SIZE,
    TIMESTAMP_TYPE_LOG_APPEND,
    BatchHeader,
)
from broker.records.varint import VarintError, decode_zigzag
from broker.records.vectorized import VARINT_MAX, Rows

# attributes, timestampDelta, offsetDelta, keyLength, valueLength, headerCount: one byte each
_MIN_RECORD_BODY = 6
# Spare bytes after the last record: the reads of a corrupt last record may run past its
# end by one varint per field (lengths are clamped to the room left) before the final
# check catches it.
_PAD = 8 * VARINT_MAX


@dataclass(frozen=True)
class RecordColumns:
    """Records of one partition in offset order, one Arrow array per field."""

    offset: pa.Array  # int64
    timestamp: pa.Array  # int64, ms (CreateTime, or the batch's LogAppendTime)
    key: pa.Array  # binary, null for a null key
    value: pa.Array  # binary, null for a null value (a tombstone)

    def __len__(self) -> int:
        return len(self.offset)

    @classmethod
    def empty(cls) -> RecordColumns:
        return cls(
            pa.array([], pa.int64()),
            pa.array([], pa.int64()),
            pa.array([], pa.binary()),
            pa.array([], pa.binary()),
        )

    @classmethod
    def from_records(cls, records: Sequence[Record]) -> RecordColumns:
        """Columns of records held as objects (tests, callers of ``iter_records``)."""
        return cls(
            pa.array([r.offset for r in records], pa.int64()),
            pa.array([r.timestamp for r in records], pa.int64()),
            pa.array([None if r.key is None else bytes(r.key) for r in records], pa.binary()),
            pa.array([None if r.value is None else bytes(r.value) for r in records], pa.binary()),
        )

    def with_values(self, value: pa.Array) -> RecordColumns:
        return RecordColumns(self.offset, self.timestamp, self.key, value)

    def filter(self, mask: pa.Array) -> RecordColumns:
        return RecordColumns(
            self.offset.filter(mask),
            self.timestamp.filter(mask),
            self.key.filter(mask),
            self.value.filter(mask),
        )

    def take(self, indices: pa.Array) -> RecordColumns:
        return RecordColumns(
            self.offset.take(indices),
            self.timestamp.take(indices),
            self.key.take(indices),
            self.value.take(indices),
        )

    def slice(self, start: int, length: int | None = None) -> RecordColumns:
        return RecordColumns(
            self.offset.slice(start, length),
            self.timestamp.slice(start, length),
            self.key.slice(start, length),
            self.value.slice(start, length),
        )


@dataclass
class _Batches:
    """The record sections of the batches to read, and what each batch says of them."""

    sections: list
    counts: list[int]
    base_offsets: list[int]
    base_timestamps: list[int]
    log_append: list[int | None]  # maxTimestamp for LogAppendTime batches, else None


def fetched_columns(
    buf,
    start: int = 0,
    end: int | None = None,
    max_uncompressed: int = DEFAULT_MAX_SIZE,
    batches: Iterable[tuple[int, BatchHeader]] | None = None,
) -> RecordColumns:
    """The data records with offsets in ``[start, end)`` of the complete batches in a
    fetched buffer (which starts at a batch boundary), as columns. ``batches``: the
    (position, header) pairs of the buffer's batches to read, in order (default: all of
    them); a reader at read_committed passes those its isolation rule keeps
    (broker/client/isolation.py ``classify_batches``)."""
    batches = _select(buf, start, end, max_uncompressed, batches)
    total = sum(batches.counts)
    if total == 0:
        return RecordColumns.empty()
    data = b"".join([*batches.sections, bytes(_PAD)])
    heads = _walk_lengths(data, batches)
    columns = _read_fields(data, heads, batches)
    offsets = columns.offset
    bounds = pc.min_max(offsets)
    if bounds["min"].as_py() < start or (end is not None and bounds["max"].as_py() >= end):
        keep = pc.greater_equal(offsets, start)
        if end is not None:
            keep = pc.and_(keep, pc.less(offsets, end))
        columns = columns.filter(keep)
    return columns


def _select(buf, start: int, end: int | None, max_uncompressed: int, chosen) -> _Batches:
    batches = _Batches([], [], [], [], [])
    view = memoryview(buf)
    for pos, header in iter_batches(buf) if chosen is None else chosen:
        if header.attributes & CONTROL or header.next_offset <= start:
            continue
        if end is not None and header.base_offset >= end:
            break
        check_batch(buf, pos)
        section = view[pos + HEADER_SIZE : pos + header.size]
        if header.codec != CODEC_NONE:
            try:
                section = decompress(header.codec, section, max_uncompressed)
            except CompressionError as exc:
                raise CorruptRecordError(f"batch at offset {header.base_offset}: {exc}") from exc
        count = header.records_count
        if count * (_MIN_RECORD_BODY + 1) > len(section):
            raise CorruptRecordError(
                f"batch at offset {header.base_offset}: {count} records cannot fit "
                f"in {len(section)} bytes"
            )
        batches.sections.append(section)
        batches.counts.append(count)
        batches.base_offsets.append(header.base_offset)
        batches.base_timestamps.append(header.base_timestamp)
        fixed = header.attributes & TIMESTAMP_TYPE_LOG_APPEND
        batches.log_append.append(header.max_timestamp if fixed else None)
    return batches


def _walk_lengths(data: bytes, batches: _Batches) -> array:
    """Where each record starts (its length prefix), batch after batch: the one serial
    step. Lengths are checked by the vectorized pass; here only that each batch's
    records end exactly where its section does."""
    heads = array("i")
    add = heads.append
    pos = 0
    for section, count, base in zip(
        batches.sections, batches.counts, batches.base_offsets, strict=True
    ):
        section_end = pos + len(section)
        try:
            for _ in range(count):
                add(pos)
                b = data[pos]
                if b < 0x80:
                    pos += 1 + ((b >> 1) ^ -(b & 1))
                else:
                    b2 = data[pos + 1]
                    if b2 < 0x80:
                        u = (b & 0x7F) | (b2 << 7)
                        pos += 2 + ((u >> 1) ^ -(u & 1))
                    else:
                        length, pos = decode_zigzag(data, pos, section_end)
                        pos += length
                if pos < 0:
                    break
        except (IndexError, VarintError):
            pos = -1
        if pos != section_end:
            _raise_for_batch(data, batches, base, "record lengths do not fill the batch")
        pos = section_end
    return heads


def _read_fields(data: bytes, heads: array, batches: _Batches) -> RecordColumns:
    count = len(heads)
    buffer = pa.py_buffer(data)
    uint8 = pa.Array.from_buffers(pa.uint8(), len(data), [None, buffer])
    starts = pa.Array.from_buffers(pa.int32(), count, [None, pa.py_buffer(heads)])
    ends = pa.concat_arrays([starts.slice(1), pa.array([len(data) - _PAD], pa.int32())])
    rows = Rows.over(uint8, starts, ends)
    length = rows.long()
    rows.mark(
        pc.or_(
            pc.less(length, _MIN_RECORD_BODY), pc.not_equal(length, rows.room().cast(pa.int64()))
        )
    )
    rows.advance(1)  # attributes: unused in v2 records
    timestamp_delta = rows.long()
    offset_delta = rows.long()
    key = rows.nullable_slices()
    value = rows.nullable_slices()
    _skip_headers(rows)
    bad = rows.finish()
    if pc.any(bad).as_py():
        first = pc.index(bad, True).as_py()
        batch = _batch_of_record(batches, first)
        _raise_for_batch(
            data, batches, batches.base_offsets[batch], "a record's fields are corrupt"
        )

    batch_of = array("i")
    for b, n in enumerate(batches.counts):
        batch_of.extend(array("i", [b]) * n)
    which = pa.Array.from_buffers(pa.int32(), count, [None, pa.py_buffer(batch_of)])
    offsets = pc.add(pa.array(batches.base_offsets, pa.int64()).take(which), offset_delta)
    timestamps = pc.add(pa.array(batches.base_timestamps, pa.int64()).take(which), timestamp_delta)
    if any(t is not None for t in batches.log_append):
        fixed = pa.array(batches.log_append, pa.int64()).take(which)
        timestamps = pc.coalesce(fixed, timestamps)
    return RecordColumns(offsets, timestamps, key, value)


def _skip_headers(rows: Rows) -> None:
    """Step over every record's headers (a key and a nullable value each), all records
    with headers left at once, one header per round."""
    left = rows.long()
    rows.mark(pc.or_(pc.less(left, 0), pc.greater(left, rows.room().cast(pa.int64()))))
    while True:
        active = pc.and_(pc.greater(left, 0), pc.invert(rows.bad))
        if not pc.any(active).as_py():
            return
        sub = rows.subset(active)
        sub.advance(sub.lengths())  # the key (a string; never null)
        size = sub.long()  # the value: nullable bytes
        room = pc.max_element_wise(sub.room(), 0)
        sub.mark(pc.or_(pc.less(size, -1), pc.greater(size, room)))
        sub.advance(pc.min_element_wise(pc.max_element_wise(size, 0), room).cast(pa.int32()))
        # Rows that ran past their end stop here; the final check marks them.
        sub.mark(pc.less(sub.room(), 0))
        rows.merge(active, sub)
        left = pc.subtract(left, active.cast(pa.int64()))


def _batch_of_record(batches: _Batches, index: int) -> int:
    for b, n in enumerate(batches.counts):
        if index < n:
            return b
        index -= n
    raise IndexError(index)


def _raise_for_batch(data: bytes, batches: _Batches, base_offset: int, fallback: str):
    """Raise the precise CorruptRecordError of the batch at ``base_offset``."""
    b = batches.base_offsets.index(base_offset)
    first = sum(len(s) for s in batches.sections[:b])
    section = data[first : first + len(batches.sections[b])]
    try:
        parse_records(section, batches.counts[b], base_offset)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"batch at offset {base_offset}: {exc}") from exc
    raise CorruptRecordError(f"batch at offset {base_offset}: {fallback}")
