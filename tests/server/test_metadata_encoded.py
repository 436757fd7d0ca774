"""Metadata answers from topic entries the metadata cache keeps encoded
(broker/server/metadata.py): the same bytes the generic codec gives the entries' dicts,
cross-checked with kafka-python's classes, before and after a leadership change and a
change of the live brokers; encoded once per topic, version and listener between changes,
not once per request (issue 23: encoding was a quarter of a broker's CPU in a failover)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kafka.protocol import metadata as generated
from kafka.protocol.old import metadata as old

from broker.cluster import BrokerRegistration, Endpoint
from broker.protocol.codec import encode_response_body
from tests.helpers.inprocess_broker import response_bytes

METADATA, CREATE_TOPICS = 3, 19
VERSIONS = (0, 1, 5, 8, 9)


def answer(broker, version: int, topics: list[str] | None) -> tuple[bytes, dict]:
    """The response body's bytes (header removed) and its decoded dict."""
    if version >= 1:
        body: dict = {"topics": None if topics is None else [{"name": t} for t in topics]}
    else:
        body = {"topics": [{"name": t} for t in topics or []]}
    if version >= 4:
        body["allow_auto_topic_creation"] = False
    outcome = broker.send(METADATA, version, body)
    data = response_bytes(outcome.parts)
    body_bytes = data[4 + (1 if version >= 9 else 0) :]  # correlation id, tagged fields
    return body_bytes, broker.decode(METADATA, version, outcome)


def assert_generic_and_kafka_python_agree(version: int, data: bytes, decoded: dict) -> None:
    assert b"".join(bytes(p) for p in encode_response_body(METADATA, version, decoded)) == data
    if version >= 9:
        theirs = generated.MetadataResponse.decode(data, version=version)
    else:
        theirs = old.MetadataResponse[version].decode(data)
    assert bytes(theirs.encode()) == data


def leaders(decoded: dict, topic: str) -> dict[int, tuple[int, int]]:
    (entry,) = [t for t in decoded["topics"] if t["name"] == topic]
    return {p["partition_index"]: (p["leader_id"], p.get("leader_epoch", -1)) for p in entry["partitions"]}  # fmt: skip


@pytest.fixture
def broker(broker):
    for name, count in (("a", 40), ("b", 3)):
        created = broker.call(
            CREATE_TOPICS,
            4,
            {"topics": [{"name": name, "num_partitions": count, "replication_factor": 1,
                         "assignments": [], "configs": []}], "timeout_ms": 5000,
             "validate_only": False},
        )  # fmt: skip
        assert created["topics"][0]["error_code"] == 0
    return broker


@pytest.mark.parametrize("version", VERSIONS)
def test_cached_entries_are_the_generic_encoding_across_a_leadership_change(broker, version):
    metadata = broker.state.metadata
    first, decoded = answer(broker, version, None)
    assert_generic_and_kafka_python_agree(version, first, decoded)
    encodings = metadata.topic_encodings
    assert encodings >= 2  # a and b (and any internal topic)
    for topics in (None, None, ["a"], ["b", "a"]):
        data, decoded = answer(broker, version, topics)
        assert_generic_and_kafka_python_agree(version, data, decoded)
    assert answer(broker, version, None)[0] == first
    assert metadata.topic_encodings == encodings, "no topic encoded again without a change"

    # A leadership change of one partition of "a" (as UpdateMetadata applies it; the ISR
    # is what v0-6 show of it).
    state = metadata.partition("a", 7)
    metadata.update(metadata.controller_id, metadata.controller_epoch, None,
                    [replace(state, leader_epoch=state.leader_epoch + 3, isr=())])  # fmt: skip
    data, decoded = answer(broker, version, None)
    assert_generic_and_kafka_python_agree(version, data, decoded)
    assert data != first
    if version >= 7:
        assert leaders(decoded, "a")[7] == (0, state.leader_epoch + 3)
    assert metadata.topic_encodings == encodings + 1, "only the changed topic again"
    answer(broker, version, ["a", "b"])
    assert metadata.topic_encodings == encodings + 1

    # Its leader's broker gone from the live brokers: every topic's entries change.
    metadata.update(metadata.controller_id, metadata.controller_epoch,
                    [BrokerRegistration(5, (Endpoint("PLAINTEXT", "127.0.0.1", 9093),))], [])  # fmt: skip
    data, decoded = answer(broker, version, None)
    assert_generic_and_kafka_python_agree(version, data, decoded)
    assert {leader for leader, _ in leaders(decoded, "a").values()} == {-1}
    assert metadata.topic_encodings == 2 * encodings + 1


def test_entries_are_kept_per_version(broker):
    metadata = broker.state.metadata
    answer(broker, 1, ["a"])
    answer(broker, 9, ["a"])
    count = metadata.topic_encodings
    answer(broker, 1, ["a"])
    answer(broker, 9, ["a"])
    assert metadata.topic_encodings == count == 2


def test_authorized_operations_asked_are_answered_without_the_cache(broker):
    body = {"topics": [{"name": "a"}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": True}  # fmt: skip
    outcome = broker.send(METADATA, 9, body)
    decoded = broker.decode(METADATA, 9, outcome)
    assert decoded["topics"][0]["topic_authorized_operations"] != -(2**31)
    assert broker.state.metadata.topic_encodings == 0
