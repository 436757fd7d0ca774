"""__transaction_state: which partition holds an id, Kafka's key and value layouts.

Expected bytes are built by hand from Kafka's TransactionLogKey / TransactionLogValue
schemas (docs/contracts/transactions.md), field by field."""

from __future__ import annotations

import struct

import pytest

from broker.protocol.types import DecodeError
from broker.transactions.state import TxnState, TxnTransit
from broker.transactions.state_topic import (
    TxnRecord,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
    partition_for,
    tombstone,
)

ONGOING = TxnTransit(
    producer_id=5,
    last_producer_id=5,
    producer_epoch=1,
    last_producer_epoch=-1,
    timeout_ms=60000,
    state=TxnState.ONGOING,
    partitions=frozenset({("b", 2), ("a", 1), ("a", 0)}),
    start_ms=10,
    update_ms=20,
)


def s16(text: str) -> bytes:  # STRING: int16 length
    return struct.pack(">h", len(text)) + text.encode()


def cstr(text: str) -> bytes:  # COMPACT_STRING: uvarint length + 1
    return bytes([len(text) + 1]) + text.encode()


def test_key_v0():
    assert encode_key("tx-1") == b"\x00\x00" + s16("tx-1")
    assert decode_key(b"\x00\x00" + s16("tx-1")) == "tx-1"
    with pytest.raises(DecodeError, match="key version 1"):
        decode_key(b"\x00\x01" + s16("tx-1"))


def test_value_v0():
    expected = (
        struct.pack(">hqhib", 0, 5, 1, 60000, 1)  # version, producer id, epoch, timeout, Ongoing
        + struct.pack(">i", 2)  # partitions: 2 topics
        + s16("a")
        + struct.pack(">iii", 2, 0, 1)
        + s16("b")
        + struct.pack(">ii", 1, 2)
        + struct.pack(">qq", 20, 10)  # last update, start
    )
    assert encode_value(ONGOING, 0) == expected
    assert decode_value(expected) == ONGOING


def test_value_v1_flexible_with_tagged_fields():
    expected = (
        struct.pack(">hqhib", 1, 5, 1, 60000, 1)
        + b"\x03"  # compact array: 2 topics
        + cstr("a")
        + b"\x03"
        + struct.pack(">ii", 0, 1)
        + b"\x00"  # the element's tagged fields
        + cstr("b")
        + b"\x02"
        + struct.pack(">i", 2)
        + b"\x00"
        + struct.pack(">qq", 20, 10)
        + b"\x00"  # no tagged field differs from its default
    )
    assert encode_value(ONGOING, 1) == expected
    assert decode_value(expected) == ONGOING


def test_value_v1_previous_producer_id_is_tag_0():
    rotated = TxnTransit(8, 7, 0, -1, 60000, TxnState.EMPTY, frozenset(), -1, 30)
    expected = (
        struct.pack(">hqhib", 1, 8, 0, 60000, 0)
        + b"\x00"  # null partitions (Empty)
        + struct.pack(">qq", 30, -1)
        + b"\x01\x00\x08"  # one tagged field: tag 0, 8 bytes
        + struct.pack(">q", 7)
    )
    assert encode_value(rotated, 1) == expected
    assert decode_value(expected) == rotated


def test_value_v1_from_kafka_with_unknown_and_client_version_tags():
    # NextProducerId (tag 1), ClientTransactionVersion (tag 2) and an unknown tag 9: read,
    # ignored where we have no use for them.
    data = (
        struct.pack(">hqhib", 1, 5, 1, 60000, 4)  # CompleteCommit
        + b"\x01"  # empty partition list
        + struct.pack(">qq", 20, 10)
        + b"\x03"
        + b"\x01\x08"
        + struct.pack(">q", 9)
        + b"\x02\x02"
        + struct.pack(">h", 2)
        + b"\x09\x01\x00"
    )
    got = decode_value(data)
    assert (got.state, got.producer_id, got.partitions) == (
        TxnState.COMPLETE_COMMIT,
        5,
        frozenset(),
    )


def test_empty_writes_null_partitions_and_reads_none():
    empty = TxnTransit(5, 5, 0, -1, 60000, TxnState.EMPTY, frozenset(), -1, 20)
    data = encode_value(empty, 0)
    assert data[2 + 8 + 2 + 4 + 1 :][:4] == b"\xff\xff\xff\xff"
    assert decode_value(data) == empty
    with pytest.raises(ValueError, match="no partitions"):
        encode_value(TxnTransit(5, 5, 0, -1, 1, TxnState.EMPTY, frozenset({("a", 0)}), 1, 2))


def test_bad_values_are_refused():
    with pytest.raises(DecodeError, match="value version 2"):
        decode_value(struct.pack(">h", 2) + bytes(40))
    bad_status = bytearray(encode_value(ONGOING, 0))
    bad_status[2 + 8 + 2 + 4] = 9
    with pytest.raises(DecodeError, match="transaction status 9"):
        decode_value(bytes(bad_status))


def test_tombstone_and_records_round_trip():
    assert encode_record(tombstone("tx")) == (b"\x00\x00" + s16("tx"), None)
    assert decode_record(*encode_record(tombstone("tx"))) == TxnRecord("tx", None)
    assert decode_record(*encode_record(TxnRecord("tx", ONGOING))) == TxnRecord("tx", ONGOING)


@pytest.mark.parametrize(
    ("transactional_id", "partitions", "expected"),
    [
        ("hello", 50, 99162322 % 50),  # Java's "hello".hashCode() = 99162322
        ("", 50, 0),
        ("polygenelubricants", 50, 0),  # hashCode is Integer.MIN_VALUE: abs gives 0
    ],
)
def test_partition_for_is_kafkas(transactional_id, partitions, expected):
    assert partition_for(transactional_id, partitions) == expected
