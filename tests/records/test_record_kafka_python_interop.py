"""Batches built by kafka-python decode with ours and the reverse, for every codec."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker.records.batch import Record, build_batch, decode_batch

T0 = 1_700_000_000_000
CODECS = [0, 1, 2, 3, 4]


def records():
    # Compressible on purpose: kafka-python sends uncompressed when compression does not help.
    return [
        (
            b"key-%d" % (i % 7) if i % 5 else None,
            b"payload %d " % i * 20 if i % 11 else None,
            T0 + i,
            [],
        )
        for i in range(300)
    ] + [
        (b"h", b"with headers " * 10, T0 - 5, [("a", b"1"), ("b", None), ("ключ", b"\x00")]),
        (b"", b"", T0, []),
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batch_decodes_with_ours(codec, kafka_python_codecs):
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=99,
        producer_epoch=1,
        base_sequence=10,
        batch_size=10**7,
    )
    source = records()
    for offset, (key, value, ts, headers) in enumerate(source):
        builder.append(offset, timestamp=ts, key=key, value=value, headers=headers)
    built = bytes(builder.build())
    header, decoded = decode_batch(built)
    assert header.codec == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (99, 1, 10)
    assert decoded == [Record(i, ts, k, v, h) for i, (k, v, ts, h) in enumerate(source)]


@pytest.mark.parametrize("codec", CODECS)
def test_our_batch_decodes_with_kafka_python(codec, kafka_python_codecs):
    source = records()
    built = build_batch(
        source, codec=codec, base_offset=500, producer_id=7, producer_epoch=2, base_sequence=3
    )
    theirs = DefaultRecordBatch(built)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert theirs.base_offset == 500
    assert theirs.last_offset_delta == len(source) - 1
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (7, 2, 3)
    decoded = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]
    assert decoded == [(500 + i, ts, k, v, list(h)) for i, (k, v, ts, h) in enumerate(source)]
