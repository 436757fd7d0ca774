from __future__ import annotations

import time

import pytest

from broker.records.batch import (
    CorruptRecordError,
    Record,
    build_batch,
    decode_batch,
    iter_batches,
    iter_records,
)
from broker.records.header import (
    CODEC_NONE,
    CRC_POS,
    HEADER_SIZE,
    LOG_OVERHEAD,
    parse_header,
    set_base_offset,
)

CODECS = [0, 1, 2, 3, 4]
T0 = 1_700_000_000_000


def sample_records():
    return [
        (b"key", b"value", T0, []),
        (None, b"null key", T0 + 5, []),
        (b"null value", None, T0 + 1, []),
        (None, None, T0 - 1000, []),  # negative timestamp delta
        (b"", b"", T0, []),  # empty, not null
        (b"k", b"v", T0, [("h1", b"one"), ("h2", None), ("ünïcødé", b""), ("h1", b"dup")]),
        (b"big" * 10_000, b"\x00\xff" * 50_000, T0 + 10**9, [("big", b"x" * 20_000)]),
    ]


def expected(records, base_offset=0):
    return [
        Record(base_offset + i, ts, key, value, list(headers))
        for i, (key, value, ts, headers) in enumerate(records)
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(codec):
    records = sample_records()
    batch = build_batch(records, codec=codec, base_offset=42)
    header, decoded = decode_batch(batch)
    assert decoded == expected(records, 42)
    assert header.codec == codec
    assert header.size == len(batch)
    assert header.base_offset == 42
    assert header.records_count == len(records)
    assert header.last_offset_delta == len(records) - 1
    assert header.base_timestamp == T0
    assert header.max_timestamp == T0 + 10**9


@pytest.mark.parametrize("codec", CODECS)
def test_large_batch_round_trip(codec):
    records = [(b"k%d" % i, b"v%d" % i * (i % 50), T0 + i * 7, []) for i in range(20_000)]
    header, decoded = decode_batch(build_batch(records, codec=codec))
    assert decoded == expected(records)
    assert header.last_offset == 19_999


def test_header_fields_and_flags():
    batch = build_batch(
        [(b"k", b"v", T0, [])],
        producer_id=1234,
        producer_epoch=5,
        base_sequence=77,
        partition_leader_epoch=9,
        transactional=True,
    )
    header = parse_header(batch)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1234, 5, 77)
    assert header.partition_leader_epoch == 9
    assert header.is_transactional and not header.is_control
    assert header.magic == 2
    control = parse_header(build_batch([(b"\x00\x00\x00\x01", b"", T0, [])], is_control=True))
    assert control.is_control


def test_log_append_time_uses_max_timestamp_for_every_record():
    records = [(b"a", b"1", T0, []), (b"b", b"2", T0 + 30, []), (b"c", b"3", T0 + 10, [])]
    header, decoded = decode_batch(build_batch(records, timestamp_type_log_append=True))
    assert header.attributes & 0x08
    assert [r.timestamp for r in decoded] == [T0 + 30] * 3


def test_none_timestamp_means_now():
    before = int(time.time() * 1000)
    _, decoded = decode_batch(build_batch([(b"k", b"v", None, [])]))
    assert before <= decoded[0].timestamp <= int(time.time() * 1000)


def test_empty_batch_is_refused():
    with pytest.raises(ValueError):
        build_batch([])


def test_base_offset_rewrite_keeps_crc_valid():
    # The broker assigns offsets by rewriting baseOffset, which is outside the CRC.
    batch = bytearray(build_batch([(b"a", b"1", T0, []), (b"b", b"2", T0, [])]))
    set_base_offset(batch, 0, 1000)
    _, decoded = decode_batch(batch)
    assert [r.offset for r in decoded] == [1000, 1001]


def test_build_is_fast_enough_for_the_producer():
    records = [(b"key-%d" % i, b"value-%d-0123456789" % i, T0 + i, []) for i in range(10_000)]
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        build_batch(records)
        best = min(best, time.perf_counter() - start)
    assert best < 0.05, f"building 10,000 records took {best * 1000:.1f} ms"


# --- corruption -------------------------------------------------------------------


def test_every_crc_covered_byte_is_checked():
    batch = build_batch(sample_records()[:6])
    for pos in range(CRC_POS, len(batch)):
        broken = bytearray(batch)
        broken[pos] ^= 0x01
        with pytest.raises(CorruptRecordError):
            decode_batch(broken)


def test_every_truncation_is_detected():
    batch = build_batch(sample_records()[:6], codec=2)
    for cut in range(len(batch)):
        with pytest.raises(CorruptRecordError):
            decode_batch(batch[:cut])


def test_bad_magic_and_short_length():
    batch = bytearray(build_batch([(b"k", b"v", T0, [])]))
    batch[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        decode_batch(batch)
    short = bytearray(build_batch([(b"k", b"v", T0, [])]))
    short[8:12] = (10).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError):
        decode_batch(short)


def test_decode_at_a_position():
    first = build_batch([(b"a", b"1", T0, [])])
    second = build_batch([(b"b", b"2", T0, [])], base_offset=1)
    _, decoded = decode_batch(first + second, len(first))
    assert decoded == [Record(1, T0, b"b", b"2", [])]


# --- walking fetched buffers ------------------------------------------------------


def _log(*batches: bytes) -> bytes:
    return b"".join(batches)


def test_iter_batches_stops_at_a_partial_trailing_batch():
    a = build_batch([(b"a", b"1", T0, [])] * 3, base_offset=0)
    b = build_batch([(b"b", b"2", T0, [])] * 2, base_offset=3, codec=1)
    c = build_batch([(b"c", b"3", T0, [])], base_offset=5)
    buf = _log(a, b, c)
    assert [(pos, h.base_offset) for pos, h in iter_batches(buf)] == [
        (0, 0),
        (len(a), 3),
        (len(a) + len(b), 5),
    ]
    for cut in range(len(a) + len(b), len(buf)):
        assert [h.base_offset for _, h in iter_batches(buf[:cut])] == [0, 3]
    assert list(iter_batches(b"")) == []
    assert list(iter_batches(a[: LOG_OVERHEAD - 1])) == []


def test_iter_batches_refuses_garbage_lengths():
    with pytest.raises(CorruptRecordError):
        list(iter_batches(bytes(8) + (5).to_bytes(4, "big") + bytes(60)))


def test_iter_records_skips_earlier_records_and_control_batches():
    a = build_batch([(b"a%d" % i, b"", T0, []) for i in range(4)], base_offset=0)
    marker = build_batch(
        [(b"\x00\x00\x00\x01", b"\x00" * 6, T0, [])], base_offset=4, is_control=True
    )
    b = build_batch([(b"b%d" % i, b"", T0, []) for i in range(3)], base_offset=5, codec=4)
    buf = _log(a, marker, b)
    assert [r.offset for r in iter_records(buf)] == [0, 1, 2, 3, 5, 6, 7]
    assert [r.key for r in iter_records(buf, start_offset=2)] == [b"a2", b"a3", b"b0", b"b1", b"b2"]
    assert [r.offset for r in iter_records(buf, start_offset=6)] == [6, 7]
    assert list(iter_records(buf, start_offset=8)) == []
    # A partial trailing batch is ignored.
    assert [r.offset for r in iter_records(buf[: len(buf) - 3])] == [0, 1, 2, 3]


def test_records_section_must_match_the_count():
    # A batch whose records section holds one record more than declared.
    batch = bytearray(build_batch([(b"a", b"1", T0, []), (b"b", b"2", T0, [])]))
    batch[57:61] = (1).to_bytes(4, "big")
    from broker.records.header import compute_crc, set_crc

    set_crc(batch, 0, compute_crc(batch, 0, len(batch)))
    with pytest.raises(CorruptRecordError, match="left after"):
        decode_batch(batch)
    batch[57:61] = (3).to_bytes(4, "big")
    set_crc(batch, 0, compute_crc(batch, 0, len(batch)))
    with pytest.raises(CorruptRecordError):
        decode_batch(batch)


def test_header_is_61_bytes():
    assert len(build_batch([(None, None, T0, [])])) == HEADER_SIZE + 7
    assert parse_header(build_batch([(None, None, T0, [])])).codec == CODEC_NONE
