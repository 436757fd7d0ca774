"""The group consumer's typed view of the consumer protocol (the bytes themselves are
checked in tests/protocol/test_consumer_protocol.py) and the sticky assignor's user data:
what kafka-python's encoders write decodes to what was written and encodes back byte for
byte."""

from __future__ import annotations

import pytest
from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment as KpAssignment,
)
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolSubscription as KpSubscription,
)

from broker.client.group.assignors.sticky import (
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from broker.client.group.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from broker.cluster import TopicPartition

TP = TopicPartition


def kp_subscription(version: int) -> KpSubscription:
    fields = {"version": version, "topics": ["clicks", "views"], "user_data": b"\x00\x01ud"}
    if version >= 1:
        fields["owned_partitions"] = [
            KpSubscription.TopicPartition(topic="views", partitions=[3, 1]),
            KpSubscription.TopicPartition(topic="clicks", partitions=[0]),
        ]
    if version >= 2:
        fields["generation_id"] = 17
    if version >= 3:
        fields["rack_id"] = "rack-a"
    return KpSubscription(**fields)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_from_kafka_python_decodes_and_encodes_back_byte_for_byte(version):
    data = bytes(kp_subscription(version).encode())
    sub = decode_subscription(data)
    assert sub.version == version
    assert sub.topics == ["clicks", "views"]
    assert sub.user_data == b"\x00\x01ud"
    assert sub.owned_partitions == (
        [TP("views", 3), TP("views", 1), TP("clicks", 0)] if version >= 1 else []
    )
    assert sub.generation_id == (17 if version >= 2 else -1)
    assert sub.rack_id == ("rack-a" if version >= 3 else None)
    assert encode_subscription(sub) == data


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_our_subscription_decodes_in_kafka_python(version):
    sub = Subscription(["t1"], None, [TP("t1", 2)], 5, "r", version=version)
    decoded = KpSubscription.decode(encode_subscription(sub))
    assert decoded.topics == ["t1"]
    assert decoded.user_data is None
    if version >= 1:
        assert [(o.topic, o.partitions) for o in decoded.owned_partitions] == [("t1", [2])]
    if version >= 3:
        assert (decoded.generation_id, decoded.rack_id) == (5, "r")


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_from_kafka_python_decodes_and_encodes_back(version):
    kp = KpAssignment(
        version=version,
        assigned_partitions=[
            KpAssignment.TopicPartition(topic="b", partitions=[2, 0]),
            KpAssignment.TopicPartition(topic="a", partitions=[1]),
        ],
        user_data=b"x",
    )
    data = bytes(kp.encode())
    assignment = decode_assignment(data)
    assert assignment == Assignment([TP("b", 2), TP("b", 0), TP("a", 1)], b"x", version)
    assert encode_assignment(assignment) == data
    back = KpAssignment.decode(encode_assignment(assignment))
    assert back.partitions() == [("b", 2), ("b", 0), ("a", 1)]


def test_empty_assignment_bytes_are_an_empty_assignment():
    # Kafka hands members the leader left out of SyncGroup zero bytes.
    assert decode_assignment(b"") == Assignment([], None, 0)
    # The empty v0 assignment kafka-python can decode (docs/client-behaviour.md).
    empty_v0 = encode_assignment(Assignment([], None, 0))
    assert empty_v0 == bytes.fromhex("0000 00000000 ffffffff")
    assert KpAssignment.decode(empty_v0).partitions() == []


def test_sticky_user_data_is_kafkas_layout_and_kafka_pythons_prefixed_one_is_read_too():
    ours = encode_sticky_user_data([TP("a", 0), TP("a", 2), TP("b", 1)], 7)
    theirs = StickyAssignorUserData([("a", [0, 2]), ("b", [1])], 7)
    # Kafka's StickyAssignor writes the struct alone: kafka-python's without its header.
    assert ours == bytes(theirs.encode(version=1, header=False))
    # kafka-python 3 sends it behind an int16 version.
    sent = bytes(theirs.encode())
    assert sent[:2] == b"\x00\x01" and sent[2:] == ours
    for data in (ours, sent):
        assert decode_sticky_user_data(data) == ([TP("a", 0), TP("a", 2), TP("b", 1)], 7)


def test_sticky_user_data_v0_and_unreadable_data():
    v0 = bytes(StickyAssignorUserData([("a", [4])], version=0).encode(version=0, header=False))
    assert decode_sticky_user_data(v0) == ([TP("a", 4)], -1)
    assert decode_sticky_user_data(b"\x01") == ([], -1)
    assert decode_sticky_user_data(None) == ([], -1)
