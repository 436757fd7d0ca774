"""Records inside v2 batches: decoding (consumers, tools, tests) and building (producers).

The broker itself never looks inside a batch on the read path; this module is for
whoever needs the records: our client library, the ingest job, and validation of
produced batches.

Both directions are hot loops (a producer batch or a fetched partition holds
thousands of records), so the record codec is written as flat loops with the
one-byte varint case inlined instead of a tower of small functions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

from broker.records.compression import DEFAULT_MAX_SIZE, CompressionError, compress, decompress
from broker.records.header import (
    CODEC_MASK,
    CODEC_NONE,
    CODEC_ZSTD,
    CONTROL,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_POS,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_LOG_APPEND,
    TRANSACTIONAL,
    BatchHeader,
    compute_crc,
    crc_is_valid,
    parse_header,
    read_offset_and_length,
    set_crc,
    write_header,
)
from broker.records.varint import (
    MINUS_ONE,
    SMALL,
    SMALL_LIMIT,
    VarintError,
    decode_zigzag,
    encode_zigzag,
)
from broker.util.clock import now_ms

MAGIC_V2 = 2
# Smallest encoded record: length, attributes, timestampDelta, offsetDelta, keyLength,
# valueLength and headerCount, one byte each.
_MIN_RECORD_SIZE = 7


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class CorruptRecordError(ValueError):
    """A batch that cannot be trusted: bad length, magic, CRC, codec or record framing."""


# --- decoding ---------------------------------------------------------------------


def decode_batch(
    buf, pos: int = 0, max_uncompressed: int = DEFAULT_MAX_SIZE
) -> tuple[BatchHeader, list[Record]]:
    """Verify and decode the batch at buf[pos:].

    Offsets are baseOffset + offsetDelta; timestamps are baseTimestamp + delta, or
    maxTimestamp for every record when the batch carries LogAppendTime.
    """
    header = check_batch(buf, pos)
    codec = header.codec
    data = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    if codec == CODEC_NONE:
        data = bytes(data)
    else:
        try:
            data = decompress(codec, data, max_uncompressed)
        except CompressionError as exc:
            raise CorruptRecordError(f"batch at offset {header.base_offset}: {exc}") from exc
    fixed_timestamp = (
        header.max_timestamp if header.attributes & TIMESTAMP_TYPE_LOG_APPEND else None
    )
    records = parse_records(
        data, header.records_count, header.base_offset, header.base_timestamp, fixed_timestamp
    )
    return header, records


def check_batch(buf, pos: int = 0) -> BatchHeader:
    """The header of the complete batch at buf[pos:] after checking length, magic, CRC and codec."""
    if len(buf) - pos < LOG_OVERHEAD:
        raise CorruptRecordError("truncated batch: no room for baseOffset and batchLength")
    _, length = read_offset_and_length(buf, pos)
    if length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batchLength {length} is below the minimum {MIN_BATCH_LENGTH}")
    if pos + LOG_OVERHEAD + length > len(buf):
        raise CorruptRecordError(
            f"truncated batch: {LOG_OVERHEAD + length} bytes declared, {len(buf) - pos} present"
        )
    magic = buf[pos + MAGIC_POS]
    if magic != MAGIC_V2:
        raise CorruptRecordError(f"unsupported magic {magic}, only record batch v2 is supported")
    header = parse_header(buf, pos)
    if not crc_is_valid(buf, pos, header):
        raise CorruptRecordError(f"CRC mismatch in batch at offset {header.base_offset}")
    if header.codec > CODEC_ZSTD:
        raise CorruptRecordError(f"unknown compression codec {header.codec}")
    if header.records_count < 0:
        raise CorruptRecordError(f"negative recordsCount {header.records_count}")
    return header


def check_record_framing(data, count: int) -> None:
    """Check that exactly `count` length-prefixed records fill `data`, without decoding
    their fields: the cheap structural check the broker makes on every produced batch
    (about a tenth of parse_records' cost). Raises CorruptRecordError."""
    end = len(data)
    if count * _MIN_RECORD_SIZE > end:
        raise CorruptRecordError(f"{count} records cannot fit in {end} bytes")
    pos = 0
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                length, pos = decode_zigzag(data, pos, end)
            if length < _MIN_RECORD_SIZE - 1:
                raise CorruptRecordError(f"bad record length {length}")
            pos += length
    except IndexError:
        raise CorruptRecordError("record length runs past the end of the batch") from None
    except VarintError as exc:  # a length varint cut short or longer than 10 bytes
        raise CorruptRecordError(f"bad record length: {exc}") from None
    if pos != end:
        raise CorruptRecordError(f"{count} records end at byte {pos} of {end}")


def parse_records(
    data: bytes,
    count: int,
    base_offset: int = 0,
    base_timestamp: int = 0,
    fixed_timestamp: int | None = None,
) -> list[Record]:
    """Decode exactly `count` records filling all of `data` (the uncompressed records section)."""
    end = len(data)
    if count * _MIN_RECORD_SIZE > end:
        raise CorruptRecordError(f"{count} records cannot fit in {end} bytes")
    records: list[Record] = []
    append = records.append
    # tuple.__new__ skips the Python-level NamedTuple.__new__ frame per record.
    new = tuple.__new__
    pos = 0
    try:
        for _ in range(count):
            # The varints are inlined for their one- and two-byte forms (values below 8192),
            # which cover nearly every length, offset delta and timestamp delta.
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                length, pos = decode_zigzag(data, pos, end)
            record_end = pos + length
            if length < _MIN_RECORD_SIZE - 1 or record_end > end:
                raise CorruptRecordError(f"bad record length {length}")
            pos += 1  # attributes: unused in v2
            b = data[pos]
            if b < 0x80:
                timestamp_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                timestamp_delta = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                timestamp_delta, pos = decode_zigzag(data, pos, record_end)
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                offset_delta = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                offset_delta, pos = decode_zigzag(data, pos, record_end)
            b = data[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                size = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                size, pos = decode_zigzag(data, pos, record_end)
            if size < 0:
                if size != -1:
                    raise CorruptRecordError(f"bad key length {size}")
                key = None
            else:
                if pos + size > record_end:
                    raise CorruptRecordError("key runs past its record")
                key = data[pos : pos + size]
                pos += size
            b = data[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                size = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                size, pos = decode_zigzag(data, pos, record_end)
            if size < 0:
                if size != -1:
                    raise CorruptRecordError(f"bad value length {size}")
                value = None
            else:
                if pos + size > record_end:
                    raise CorruptRecordError("value runs past its record")
                value = data[pos : pos + size]
                pos += size
            b = data[pos]
            if b < 0x80:
                header_count = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                header_count, pos = decode_zigzag(data, pos, record_end)
            if header_count:
                pos, headers = _parse_headers(data, pos, record_end, header_count)
            else:
                headers = []
            if pos != record_end:
                raise CorruptRecordError(
                    f"record declares {length} bytes but its fields take {length + pos - record_end}"
                )
            append(
                new(
                    Record,
                    (
                        base_offset + offset_delta,
                        base_timestamp + timestamp_delta
                        if fixed_timestamp is None
                        else fixed_timestamp,
                        key,
                        value,
                        headers,
                    ),
                )
            )
    except IndexError as exc:
        raise CorruptRecordError("record runs past the end of the batch") from exc
    except VarintError as exc:
        raise CorruptRecordError(str(exc)) from exc
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the declared {count} records")
    return records


def _parse_headers(
    data: bytes, pos: int, end: int, count: int
) -> tuple[int, list[tuple[str, bytes | None]]]:
    if count < 0 or count * 2 > end - pos:
        raise CorruptRecordError(f"bad header count {count}")
    headers = []
    for _ in range(count):
        size, pos = decode_zigzag(data, pos, end)
        if size < 0 or pos + size > end:
            raise CorruptRecordError(f"bad header key length {size}")
        try:
            name = data[pos : pos + size].decode()
        except UnicodeDecodeError as exc:
            raise CorruptRecordError("header key is not UTF-8") from exc
        pos += size
        size, pos = decode_zigzag(data, pos, end)
        if size < 0:
            if size != -1:
                raise CorruptRecordError(f"bad header value length {size}")
            value = None
        else:
            if pos + size > end:
                raise CorruptRecordError("header value runs past its record")
            value = data[pos : pos + size]
            pos += size
        headers.append((name, value))
    return pos, headers


def iter_batches(buf) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of every complete batch in `buf`, which starts at a batch boundary.

    Stops silently at a partial trailing batch (Fetch responses may end with one).
    Only the framing is checked here (length and magic), not CRCs: decode_batch does that.
    """
    end = len(buf)
    pos = 0
    while end - pos >= LOG_OVERHEAD:
        _, length = read_offset_and_length(buf, pos)
        if length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batchLength {length} at position {pos} is below the minimum")
        size = LOG_OVERHEAD + length
        if pos + size > end:
            return
        magic = buf[pos + MAGIC_POS]
        if magic != MAGIC_V2:
            raise CorruptRecordError(f"unsupported magic {magic} at position {pos}")
        yield pos, parse_header(buf, pos)
        pos += size


def iter_records(buf, start_offset: int = 0) -> Iterator[Record]:
    """The data records of all complete batches in a fetched buffer, from start_offset on.

    A fetch starts at the batch containing the requested offset, so earlier records of
    that batch are skipped; control batches (transaction markers) are not data.
    """
    for pos, header in iter_batches(buf):
        if header.attributes & CONTROL or header.next_offset <= start_offset:
            continue
        _, records = decode_batch(buf, pos)
        for record in records:
            if record.offset >= start_offset:
                yield record


# --- building ---------------------------------------------------------------------


def build_batch(
    records: Sequence[
        tuple[bytes | None, bytes | None, int | None, Sequence[tuple[str, bytes | None]]]
    ],
    codec: int = CODEC_NONE,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    transactional: bool = False,
    is_control: bool = False,
    timestamp_type_log_append: bool = False,
) -> bytes:
    """Encode (key, value, timestamp_ms, headers) tuples as one v2 batch.

    A timestamp of None means "now". The first record's timestamp is the base, as
    the Java client does; deltas may be negative.
    """
    count = len(records)
    if count == 0:
        raise ValueError("a record batch needs at least one record")
    if not 0 <= codec <= CODEC_ZSTD:
        raise ValueError(f"unknown compression codec {codec}")
    now = None
    timestamps = [r[2] for r in records]
    if None in timestamps:
        now = now_ms()
        timestamps = [now if t is None else t for t in timestamps]
    base_timestamp = timestamps[0]
    max_timestamp = max(timestamps)

    small = SMALL
    limit = SMALL_LIMIT
    zigzag = encode_zigzag
    null = MINUS_ONE
    body = bytearray()
    for offset_delta, (key, value, _, headers) in enumerate(records):
        delta = timestamps[offset_delta] - base_timestamp
        rec = b"\x00" + (small[delta] if 0 <= delta < limit else zigzag(delta))
        rec += small[offset_delta] if offset_delta < limit else zigzag(offset_delta)
        if key is None:
            rec += null
        else:
            size = len(key)
            rec += (small[size] if size < limit else zigzag(size)) + key
        if value is None:
            rec += null
        else:
            size = len(value)
            rec += (small[size] if size < limit else zigzag(size)) + value
        if headers:
            rec += _encode_headers(headers)
        else:
            rec += b"\x00"
        size = len(rec)
        body += small[size] if size < limit else zigzag(size)
        body += rec

    records_section = compress(codec, body) if codec != CODEC_NONE else body
    attributes = codec & CODEC_MASK
    if timestamp_type_log_append:
        attributes |= TIMESTAMP_TYPE_LOG_APPEND
    if transactional:
        attributes |= TRANSACTIONAL
    if is_control:
        attributes |= CONTROL
    size = HEADER_SIZE + len(records_section)
    out = bytearray(HEADER_SIZE)
    out += records_section
    header = BatchHeader(
        base_offset,
        size - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC_V2,
        0,
        attributes,
        count - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    write_header(out, 0, header)
    set_crc(out, 0, compute_crc(out, 0, size))
    return bytes(out)


def _encode_headers(headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    out = bytearray(zigzag_len(len(headers)))
    for name, value in headers:
        raw = name.encode()
        out += zigzag_len(len(raw))
        out += raw
        if value is None:
            out += MINUS_ONE
        else:
            out += zigzag_len(len(value))
            out += value
    return bytes(out)


def zigzag_len(size: int) -> bytes:
    return SMALL[size] if size < SMALL_LIMIT else encode_zigzag(size)
