"""ListOffsets, Metadata, CreateTopics, DeleteTopics and InitProducerId in process."""

from __future__ import annotations

import pytest

from broker.protocol.apis import DELETE_TOPICS, INIT_PRODUCER_ID, METADATA
from broker.protocol.errors import ErrorCode
from broker.records.header import CODEC_GZIP
from tests.helpers.server_requests import create, list_offsets, produce

# -- ListOffsets -------------------------------------------------------------------------


def _produce_timed(broker):
    from broker.records.batch import build_batch

    create(broker, "t")
    first = [(None, b"a", 1234, []), (None, b"b", 999_999_999_999, []), (None, b"c", 5, [])]
    produce(broker, "t", build_batch(first, codec=CODEC_GZIP))
    produce(broker, "t", build_batch([(None, b"d", 3000, []), (None, b"e", 999_999_999_999, [])]))


def test_list_offsets_asks_the_leader(broker):
    _produce_timed(broker)
    broker.state.replicas.stop_replicas([("t", 0)], delete=False)  # a follower now
    assert list_offsets(broker, "t", -1)["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # Debugging tools (replica id -2) may read a follower, as in Kafka.
    assert list_offsets(broker, "t", -2, replica_id=-2)["error_code"] == 0


@pytest.mark.parametrize(
    ("timestamp", "offset", "found_ts"),
    [
        (-1, 5, -1),  # latest: the high watermark
        (-2, 0, -1),  # earliest
        (-3, 1, 999_999_999_999),  # the largest timestamp, first record holding it
        (999_999_999_999, 1, 999_999_999_999),  # per record inside the compressed batch
        (1234, 0, 1234),
        (1235, 1, 999_999_999_999),
        (2000, 1, 999_999_999_999),
        (1_000_000_000_000, -1, -1),  # none that late
    ],
)
def test_list_offsets(broker, timestamp, offset, found_ts):
    _produce_timed(broker)
    p = list_offsets(broker, "t", timestamp)
    assert (p["error_code"], p["offset"], p["timestamp"]) == (0, offset, found_ts)
    assert p["leader_epoch"] == (-1 if offset == -1 else 0)


def test_list_offsets_errors(broker):
    _produce_timed(broker)
    assert list_offsets(broker, "nope", -1)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert list_offsets(broker, "t", -1, epoch=5)["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert list_offsets(broker, "t", -4)["error_code"] == ErrorCode.INVALID_REQUEST
    assert list_offsets(broker, "t", -1, epoch=0)["offset"] == 5


def test_list_offsets_old_versions_answer_the_same(broker):
    _produce_timed(broker)
    for version in range(1, 8):
        p = list_offsets(broker, "t", 1235, version=version)
        assert p["offset"] == 1, version


# -- Metadata ----------------------------------------------------------------------------


def _metadata(broker, topics, version=8, auto=True):
    body = {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": auto,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    return broker.call(METADATA, version, body)


def test_metadata_lists_the_broker_the_controller_and_every_topic(broker):
    create(broker, "b", 2)
    create(broker, "a")
    md = _metadata(broker, None)
    assert [b["node_id"] for b in md["brokers"]] == [0] and md["controller_id"] == 0
    assert [t["name"] for t in md["topics"]] == ["a", "b"]
    (b_topic,) = [t for t in md["topics"] if t["name"] == "b"]
    assert [
        (p["partition_index"], p["leader_id"], p["isr_nodes"]) for p in b_topic["partitions"]
    ] == [
        (0, 0, [0]),
        (1, 0, [0]),
    ]
    v0 = _metadata(broker, [], version=0)  # v0: an empty list means every topic
    assert [t["name"] for t in v0["topics"]] == ["a", "b"]


def test_metadata_auto_creates_only_when_both_sides_allow(make_broker):
    b = make_broker(**{"num.partitions": "3"})
    (t,) = _metadata(b, ["fresh"])["topics"]
    assert (t["error_code"], len(t["partitions"])) == (0, 3)
    (t,) = _metadata(b, ["not-asked"], auto=False)["topics"]
    assert t["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    off = make_broker(**{"auto.create.topics.enable": "false"})
    (t,) = _metadata(off, ["fresh"])["topics"]
    assert t["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_for_an_illegal_name_is_invalid_topic(broker):
    (t,) = _metadata(broker, ["bad name!"])["topics"]
    assert t["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION


# -- CreateTopics / DeleteTopics ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "partitions", "configs", "code"),
    [
        ("ok", 2, {}, ErrorCode.NONE),
        ("bad/name", 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("x" * 250, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("zero", 0, {}, ErrorCode.INVALID_PARTITIONS),
        ("cfg", 1, {"retention.ms": "soon"}, ErrorCode.INVALID_CONFIG),
        ("cfg2", 1, {"no.such.key": "1"}, ErrorCode.INVALID_CONFIG),
    ],
)
def test_create_topics(broker, name, partitions, configs, code):
    topic = create(broker, name, partitions, configs)
    assert topic["error_code"] == code
    assert (code == 0) == (name in broker.state.metadata.topics)
    if code:
        assert topic["error_message"]


def test_create_existing_topic_and_replication_factor(broker):
    assert create(broker, "t")["error_code"] == 0
    assert create(broker, "t")["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS
    from broker.protocol.apis import CREATE_TOPICS

    body = {
        "topics": [{"name": "rf", "num_partitions": 1, "replication_factor": 3,
                    "assignments": [], "configs": []}],
        "timeout_ms": 1000, "validate_only": False,
    }  # fmt: skip
    (t,) = broker.call(CREATE_TOPICS, 4, body)["topics"]
    assert t["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
    body["topics"][0].update(name="v", replication_factor=1)
    body["validate_only"] = True
    (t,) = broker.call(CREATE_TOPICS, 4, body)["topics"]
    assert t["error_code"] == 0 and "v" not in broker.state.metadata.topics


def test_delete_topics(make_broker):
    b = make_broker()
    create(b, "gone")
    body = {"topic_names": ["gone", "never"], "timeout_ms": 1000}
    answer = b.call(DELETE_TOPICS, 3, body)["responses"]
    assert [(r["name"], r["error_code"]) for r in answer] == [
        ("gone", 0),
        ("never", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert "gone" not in b.state.metadata.topics
    locked = make_broker(**{"delete.topic.enable": "false"})
    create(locked, "kept")
    (r,) = locked.call(DELETE_TOPICS, 3, {"topic_names": ["kept"], "timeout_ms": 1})["responses"]
    assert r["error_code"] == ErrorCode.TOPIC_DELETION_DISABLED


# -- InitProducerId ----------------------------------------------------------------------


def test_init_producer_id_allocates_distinct_ids(broker):
    body = {"transactional_id": None, "transaction_timeout_ms": 60000}
    ids = [broker.call(INIT_PRODUCER_ID, 1, body)["producer_id"] for _ in range(3)]
    assert len(set(ids)) == 3 and all(i >= 0 for i in ids)
    # A transactional id goes to its coordinator (tests/transactions/test_wiring.py):
    # none before FindCoordinator created __transaction_state.
    refused = broker.call(INIT_PRODUCER_ID, 1, {**body, "transactional_id": "txn"})
    assert (refused["error_code"], refused["producer_id"]) == (ErrorCode.NOT_COORDINATOR, -1)


def test_create_with_a_replica_assignment(broker):
    from broker.protocol.apis import CREATE_TOPICS

    def create_with(assignments, partitions=-1, factor=-1):
        body = {
            "topics": [{"name": "manual", "num_partitions": partitions,
                        "replication_factor": factor, "configs": [],
                        "assignments": [{"partition_index": p, "broker_ids": b}
                                        for p, b in assignments.items()]}],
            "timeout_ms": 1000, "validate_only": True,
        }  # fmt: skip
        (t,) = broker.call(CREATE_TOPICS, 4, body)["topics"]
        return t["error_code"]

    assert create_with({0: [0], 1: [0]}) == 0
    assert create_with({0: [0]}, partitions=1) == ErrorCode.INVALID_REQUEST
    assert create_with({0: [0], 2: [0]}) == ErrorCode.INVALID_REPLICA_ASSIGNMENT  # a gap
    assert create_with({0: [0, 0]}) == ErrorCode.INVALID_REPLICA_ASSIGNMENT  # duplicate
    assert create_with({0: [7]}) == ErrorCode.INVALID_REPLICA_ASSIGNMENT  # unknown broker
