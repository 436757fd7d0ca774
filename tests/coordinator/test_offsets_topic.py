"""__consumer_offsets: which partition holds a group, and Kafka's record layouts."""

from __future__ import annotations

import struct

import pytest

from broker.coordinator.offsets_topic import (
    CommittedOffset,
    GroupKey,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    java_string_hash,
    partition_for,
)
from broker.protocol.types import DecodeError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello", 99162322),  # values printed by Java 17's "...".hashCode()
        ("console-consumer-12345", 158455506),
        ("é", 233),
        ("😀", 1772899),  # a surrogate pair: two UTF-16 units
    ],
)
def test_java_string_hash(text, expected):
    assert java_string_hash(text) == expected


def test_a_group_lands_where_kafka_puts_it():
    # abs(hashCode) % 50, and Integer.MIN_VALUE (whose abs overflows) maps to 0.
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("console-consumer-12345", 50) == 158455506 % 50
    assert partition_for("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE
    assert java_string_hash("polygenelubricants") == -(2**31)


def test_offset_key_layout():
    key = encode_offset_key("g", "t", 3)
    assert key == struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", 3)
    assert decode_key(key) == OffsetKey("g", "t", 3)
    assert decode_key(struct.pack(">hh1sh1si", 0, 1, b"g", 1, b"t", 3)) == OffsetKey("g", "t", 3)


def test_group_key_layout():
    assert encode_group_key("grp") == struct.pack(">hh3s", 2, 3, b"grp")
    assert decode_key(encode_group_key("grp")) == GroupKey("grp")


def test_offset_values_v3_and_v1():
    v3 = encode_offset_value(CommittedOffset(42, 7, "meta", 1000))
    assert v3 == struct.pack(">hqih4sq", 3, 42, 7, 4, b"meta", 1000)
    assert decode_offset_value(v3) == CommittedOffset(42, 7, "meta", 1000)
    # A commit with its own retention is written as v1 (the only layout with an expiry).
    v1 = encode_offset_value(CommittedOffset(42, -1, "", 1000, 5000))
    assert v1 == struct.pack(">hqhqq", 1, 42, 0, 1000, 5000)
    assert decode_offset_value(v1).expire_timestamp_ms == 5000
    v0 = struct.pack(">hqhq", 0, 5, 0, 99)
    assert decode_offset_value(v0) == CommittedOffset(5, -1, "", 99)


def test_group_value_round_trip():
    value = {
        "protocol_type": "consumer",
        "generation": 4,
        "protocol": "range",
        "leader": "m1",
        "current_state_timestamp": 123,
        "members": [
            {
                "member_id": "m1",
                "group_instance_id": "i1",
                "client_id": "c",
                "client_host": "/127.0.0.1",
                "rebalance_timeout": 300000,
                "session_timeout": 45000,
                "subscription": b"sub",
                "assignment": b"asg",
            }
        ],
    }
    encoded = encode_group_value(value)
    assert encoded[:2] == b"\x00\x03"
    assert decode_group_value(encoded) == value


def test_garbage_is_a_decode_error():
    with pytest.raises(DecodeError):
        decode_key(struct.pack(">h", 9) + b"xx")
    with pytest.raises(DecodeError):
        decode_offset_value(struct.pack(">h", 7))
    with pytest.raises(DecodeError):
        decode_offset_value(b"\x00")
