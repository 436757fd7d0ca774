"""The cleaner's batch rewriting: the record walk agrees with the full decoder; a rebuilt
batch keeps every field the contract says it keeps, for every codec, with and without a
delete horizon, and reads the same with kafka-python; the empty batch header."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from broker.records.batch import CorruptRecordError, build_batch, decode_batch
from broker.records.compression import decompress
from broker.records.header import CODEC_NONE, DELETE_HORIZON, HEADER_SIZE, parse_header
from broker.records.rewrite import delete_horizon, empty_batch, rebuild_batch
from broker.records.spans import scan_records

T0 = 1_700_000_000_000
CODECS = [0, 1, 2, 3, 4]

records = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=300)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.integers(-(10**6), 10**6),
        st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=9)))),
    ),
    min_size=1,
    max_size=40,
)


def section(batch: bytes) -> bytes:
    header = parse_header(batch)
    body = batch[HEADER_SIZE : header.size]
    return body if header.codec == CODEC_NONE else decompress(header.codec, body)


@settings(max_examples=200, deadline=None)
@given(recs=records)
def test_the_walk_agrees_with_the_decoder(recs):
    batch = build_batch([(k, v, T0 + t, h) for k, v, t, h in recs], base_offset=40)
    header, decoded = decode_batch(batch)
    spans = scan_records(section(batch), header.records_count)
    assert [(40 + s[4], header.base_timestamp + s[5], s[6], s[7]) for s in spans] == [
        (r.offset, r.timestamp, r.key, r.value is not None) for r in decoded
    ]
    assert spans[-1][3] == len(section(batch))


def test_the_walk_refuses_broken_framing():
    batch = build_batch([(b"k", b"v", T0, [])] * 3)
    with pytest.raises(CorruptRecordError):
        scan_records(section(batch)[:-1], 3)
    with pytest.raises(CorruptRecordError):
        scan_records(section(batch), 4)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("horizon", [None, T0 + 86_400_000])
def test_a_rebuilt_batch_keeps_offsets_producer_fields_and_records(
    codec, horizon, kafka_python_codecs
):
    source = [
        (b"k%d" % i, None if i % 4 == 0 else b"value %d " % i * 9, T0 + 13 * i - 500, [])
        for i in range(30)
    ] + [(b"h", b"v", T0 + 7, [("x", b"1"), ("y", None)])]
    batch = build_batch(
        source,
        codec=codec,
        base_offset=1000,
        producer_id=42,
        producer_epoch=3,
        base_sequence=77,
        partition_leader_epoch=9,
    )
    header, decoded = decode_batch(batch)
    data = section(batch)
    kept = [s for s in scan_records(data, header.records_count) if s[4] % 3]
    rebuilt = rebuild_batch(header, data, kept, horizon)
    new, survivors = decode_batch(rebuilt)
    assert survivors == [r for r in decoded if (r.offset - 1000) % 3]
    assert (new.base_offset, new.last_offset, new.partition_leader_epoch) == (1000, 1030, 9)
    assert (new.producer_id, new.producer_epoch, new.base_sequence) == (42, 3, 77)
    assert new.codec == codec and new.records_count == len(survivors)
    assert new.max_timestamp == max(r.timestamp for r in survivors)
    assert delete_horizon(new) == horizon
    theirs = DefaultRecordBatch(rebuilt)
    assert theirs.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value) for r in theirs] == [
        (r.offset, r.timestamp, r.key, r.value) for r in survivors
    ]


def test_a_batch_with_a_horizon_keeps_it_when_rebuilt_again():
    batch = build_batch([(b"a", None, T0, []), (b"b", b"1", T0 + 5, [])])
    header, _ = decode_batch(batch)
    spans = scan_records(section(batch), 2)
    once = rebuild_batch(header, section(batch), spans, horizon=T0 + 1000)
    header, _ = decode_batch(once)
    again = rebuild_batch(header, section(once), scan_records(section(once), 2)[:1], T0 + 9999)
    new, survivors = decode_batch(again)
    assert delete_horizon(new) == T0 + 1000
    assert [(r.key, r.value, r.timestamp) for r in survivors] == [(b"a", None, T0)]


def test_log_append_time_batches_keep_their_timestamp():
    batch = build_batch(
        [(b"a", b"1", T0, []), (b"b", None, T0, [])],
        timestamp_type_log_append=True,
    )
    header, _ = decode_batch(batch)
    spans = scan_records(section(batch), 2)
    new, survivors = decode_batch(rebuild_batch(header, section(batch), spans[1:], T0 + 50))
    assert new.max_timestamp == header.max_timestamp
    assert [r.timestamp for r in survivors] == [header.max_timestamp]


@pytest.mark.parametrize("codec", CODECS)
def test_the_empty_batch_keeps_the_offsets_and_the_producer(codec, kafka_python_codecs):
    batch = build_batch(
        [(b"k", b"v" * 50, T0 + i, []) for i in range(5)],
        codec=codec,
        base_offset=70,
        producer_id=5,
        producer_epoch=1,
        base_sequence=20,
        partition_leader_epoch=4,
    )
    header, _ = decode_batch(batch)
    empty = empty_batch(header)
    new, survivors = decode_batch(empty)
    assert survivors == [] and len(empty) == HEADER_SIZE
    assert (new.base_offset, new.last_offset, new.last_sequence) == (70, 74, 24)
    assert (new.producer_id, new.partition_leader_epoch, new.codec) == (5, 4, 0)
    assert not new.attributes & DELETE_HORIZON
    theirs = DefaultRecordBatch(empty)
    assert theirs.validate_crc() and list(theirs) == []
    assert theirs.next_offset == 75
