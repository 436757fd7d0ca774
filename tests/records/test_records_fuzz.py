"""Random and mutated bytes never escape as anything but the documented exceptions."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.records.batch import (
    CorruptRecordError,
    build_batch,
    decode_batch,
    iter_batches,
    iter_records,
)
from broker.records.compression import CompressionError, compress, decompress
from broker.records.header import compute_crc, set_crc
from broker.records.validate import RecordsError, validate_produce_records

T0 = 1_700_000_000_000
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

record = st.tuples(
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=200)),
    st.integers(min_value=0, max_value=2**41),
    st.lists(
        st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))), max_size=3
    ),
)
codec = st.integers(min_value=0, max_value=4)


@st.composite
def mutated_batch(draw):
    """A valid batch with bytes flipped, inserted or cut, and often a CRC fixed to match,
    so the mutation reaches the record parser instead of stopping at the CRC."""
    records = draw(st.lists(record, min_size=1, max_size=8))
    raw = bytearray(build_batch(records, codec=draw(codec)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        pos = draw(st.integers(min_value=0, max_value=len(raw) - 1))
        action = draw(st.sampled_from(["flip", "insert", "delete", "cut"]))
        if action == "flip":
            raw[pos] ^= draw(st.integers(min_value=1, max_value=255))
        elif action == "insert":
            raw[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif action == "delete":
            del raw[pos]
        else:
            del raw[pos:]
        if not raw:
            break
    if len(raw) >= 61 and draw(st.booleans()):
        set_crc(raw, 0, compute_crc(raw, 0, len(raw)))
    return bytes(raw)


@SETTINGS
@given(st.lists(record, min_size=1, max_size=20), codec)
def test_round_trip(records, codec_id):
    header, decoded = decode_batch(build_batch(records, codec=codec_id, base_offset=3))
    assert [(r.key, r.value, r.timestamp, r.headers) for r in decoded] == [
        (k, v, ts, list(h)) for k, v, ts, h in records
    ]
    assert [r.offset for r in decoded] == list(range(3, 3 + len(records)))


@SETTINGS
@given(st.one_of(mutated_batch(), st.binary(max_size=200)))
def test_decoding_raises_only_corrupt_record_error(data):
    try:
        decode_batch(data)
    except CorruptRecordError:
        pass
    try:
        list(iter_records(data))
    except CorruptRecordError:
        pass
    try:
        list(iter_batches(data))
    except CorruptRecordError:
        pass


@SETTINGS
@given(st.one_of(mutated_batch(), st.binary(max_size=200)))
def test_validation_raises_only_records_error(data):
    try:
        validate_produce_records(data, 1024 * 1024, max_uncompressed_bytes=1024 * 1024)
    except RecordsError as exc:
        assert exc.error_code in (2, 10, 76, 87)


@SETTINGS
@given(codec, st.binary(max_size=3000), st.data())
def test_decompress_raises_only_compression_error(codec_id, payload, data):
    packed = bytearray(compress(codec_id, payload))
    if packed:
        for _ in range(data.draw(st.integers(min_value=0, max_value=3))):
            pos = data.draw(st.integers(min_value=0, max_value=len(packed) - 1))
            packed[pos] ^= data.draw(st.integers(min_value=1, max_value=255))
    if data.draw(st.booleans()):
        packed = packed[: data.draw(st.integers(min_value=0, max_value=len(packed)))]
    try:
        out = decompress(codec_id, bytes(packed), max_size=64 * 1024)
    except CompressionError:
        return
    assert len(out) <= 64 * 1024


@SETTINGS
@given(codec, st.binary(max_size=300))
def test_decompress_random_bytes(codec_id, garbage):
    try:
        decompress(codec_id, garbage, max_size=64 * 1024)
    except CompressionError:
        pass
