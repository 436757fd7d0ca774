"""The consumer protocol's bytes agree with kafka-python's encoders and decoders."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from broker.protocol.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    subscription_topics,
)
from broker.protocol.types import DecodeError

SUBSCRIPTION = {
    "topics": ["a", "b"],
    "user_data": b"u",
    "owned_partitions": [{"topic": "a", "partitions": [0, 2]}],
    "generation_id": 7,
    "rack_id": "r1",
}


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_matches_kafka_python(version):
    ours = encode_subscription(SUBSCRIPTION, version)
    theirs = ConsumerProtocolSubscription.decode(ours, version=version)
    assert bytes(theirs.encode(version=version)) == ours
    assert list(theirs.topics) == ["a", "b"]
    decoded_version, decoded = decode_subscription(ours)
    assert decoded_version == version and decoded["topics"] == ["a", "b"]
    if version >= 1:
        assert decoded["owned_partitions"] == SUBSCRIPTION["owned_partitions"]
    assert subscription_topics(ours) == {"a", "b"}


@pytest.mark.parametrize("version", [0, 1, 3])
def test_assignment_matches_kafka_python(version):
    value = {"assigned_partitions": [{"topic": "t", "partitions": [1, 3]}], "user_data": None}
    ours = encode_assignment(value, version)
    theirs = ConsumerProtocolAssignment.decode(ours, version=version)
    assert bytes(theirs.encode(version=version)) == ours
    assert decode_assignment(ours) == (version, value)


def test_an_empty_assignment_is_ten_bytes():
    empty = encode_assignment({"assigned_partitions": []})
    assert empty == bytes.fromhex("000000000000ffffffff")


def test_a_newer_version_decodes_as_the_newest_known():
    newer = b"\x00\x09" + encode_subscription(SUBSCRIPTION, 3)[2:] + b"more fields"
    assert decode_subscription(newer)[1]["rack_id"] == "r1"


def test_garbage_is_a_decode_error():
    with pytest.raises(DecodeError):
        decode_subscription(b"\x00\x00\x00\x00\x00\x05a")
    with pytest.raises(DecodeError):
        decode_assignment(b"\xff\xff")
