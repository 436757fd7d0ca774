"""OffsetForLeaderEpoch in process, every version and error, and leader epochs that
survive a restart (Metadata and ListOffsets answer them)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from broker.protocol.apis import METADATA, OFFSET_FOR_LEADER_EPOCH
from broker.protocol.errors import ErrorCode
from broker.records.batch import iter_batches
from broker.server.partition import Leadership
from broker.server.replica_manager import PartitionDecision
from tests.helpers.inprocess_broker import InProcessBroker
from tests.helpers.server_requests import create, fetch, list_offsets, produce, values

VERSIONS = range(4)


def lead_in_epoch(broker, topic: str, epoch: int, partition: int = 0) -> None:
    """A leadership change, as the controller decides it: the replica manager applies it
    (a LeaderAndIsr) and the metadata cache is told (an UpdateMetadata)."""
    decision = PartitionDecision(topic, partition, Leadership(0, epoch, (0,), (0,)))
    broker.state.replicas.apply_leadership([decision], {})
    state = broker.state.metadata.partition(topic, partition)
    broker.state.metadata.update(0, 1, None, [replace(state, leader_epoch=epoch)])


def history(broker, topic: str = "t") -> None:
    """Epoch 0 appends offsets 0-2 (timestamps 1000-1002), epoch 2 offsets 3-4 (5000-5001),
    epoch 5 offsets 5-7 (9000-9002)."""
    create(broker, topic)
    produce(broker, topic, values(b"a", b"b", b"c", timestamp=1000))
    lead_in_epoch(broker, topic, 2)
    produce(broker, topic, values(b"d", b"e", timestamp=5000))
    lead_in_epoch(broker, topic, 5)
    produce(broker, topic, values(b"f", b"g", b"h", timestamp=9000))


def ask(broker, topic, epoch, version=3, current=-1, partition=0, replica_id=-1) -> dict:
    body = {
        "replica_id": replica_id,
        "topics": [{"topic": topic, "partitions": [
            {"partition": partition, "current_leader_epoch": current, "leader_epoch": epoch}
        ]}],
    }  # fmt: skip
    answer = broker.call(OFFSET_FOR_LEADER_EPOCH, version, body)
    (t,) = answer["topics"]
    assert t["topic"] == topic
    (p,) = t["partitions"]
    assert p["partition"] == partition
    return p


def found(p: dict) -> tuple[int, int, int]:
    return p["error_code"], p["leader_epoch"], p["end_offset"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("requested", "epoch", "end_offset"),
    [
        (5, 5, 8),  # the latest epoch: the log end
        (2, 2, 5),  # where epoch 5 starts
        (0, 0, 3),
        (3, 2, 5),  # never led here: the epoch below it, and its end
        (4, 2, 5),
        (6, -1, -1),  # newer than any epoch here
        (-1, -1, -1),
    ],
)
def test_the_end_of_each_epoch(broker, version, requested, epoch, end_offset):
    history(broker)
    p = ask(broker, "t", requested, version)
    # v0 has no leader_epoch in its answer: it decodes to the declared default (-1).
    assert found(p) == (ErrorCode.NONE, epoch if version >= 1 else -1, end_offset)


def test_an_epoch_older_than_the_log_answers_the_log_start(broker):
    """Retention removed epoch 0's batches: Kafka answers the epoch asked for and the start
    of the first epoch it still has (KIP-279), so a follower truncates no lower."""
    create(broker, "t", configs={"segment.bytes": "1024", "retention.ms": "1000"})
    big = b"x" * 700  # one batch per segment
    produce(broker, "t", values(big, timestamp=1))
    produce(broker, "t", values(big, timestamp=1))
    lead_in_epoch(broker, "t", 1)
    produce(broker, "t", values(big, timestamp=broker.clock.now))
    log = broker.state.replicas.get("t", 0).log
    assert log.delete_expired(broker.clock.now) == 2
    assert log.log_start_offset == 2
    assert found(ask(broker, "t", 0)) == (ErrorCode.NONE, 0, 2)
    assert found(ask(broker, "t", 1)) == (ErrorCode.NONE, 1, 3)


def test_an_empty_partition_knows_only_the_epoch_it_is_led_in(broker):
    """A leader records its epoch at its log end when it takes over (as Kafka), before
    any append: followers asking find where it starts."""
    create(broker, "t")
    assert found(ask(broker, "t", 0)) == (ErrorCode.NONE, 0, 0)
    assert found(ask(broker, "t", 1)) == (ErrorCode.NONE, -1, -1)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_partition_not_hosted_here(broker, version):
    history(broker)
    for topic, partition in (("nope", 0), ("t", 1)):
        p = ask(broker, topic, 0, version, partition=partition)
        assert found(p) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize(
    ("current", "code"),
    [
        (4, ErrorCode.FENCED_LEADER_EPOCH),  # the client's metadata is older than ours
        (6, ErrorCode.UNKNOWN_LEADER_EPOCH),  # newer than ours
        (5, ErrorCode.NONE),
        (-1, ErrorCode.NONE),  # not checked
    ],
)
def test_current_leader_epoch_is_checked_as_fetch_does(broker, version, current, code):
    history(broker)
    p = ask(broker, "t", 2, version, current=current)
    assert found(p) == ((code, -1, -1) if code else (ErrorCode.NONE, 2, 5))


@pytest.mark.parametrize("version", [0, 1])
def test_versions_without_current_leader_epoch_are_not_fenced(broker, version):
    history(broker)
    assert found(ask(broker, "t", 2, version, current=4))[0] == ErrorCode.NONE


def test_replica_id_changes_nothing(broker):
    history(broker)
    answers = {found(ask(broker, "t", 2, 3, replica_id=r)) for r in (-1, 1, 7)}
    assert answers == {(ErrorCode.NONE, 2, 5)}


def test_many_topics_and_partitions_in_one_request(broker):
    history(broker)
    create(broker, "u", partitions=2)
    produce(broker, "u", values(b"x"), partition=1)
    body = {
        "replica_id": -1,
        "topics": [
            {"topic": "t", "partitions": [
                {"partition": 0, "current_leader_epoch": 5, "leader_epoch": 0},
                {"partition": 3, "current_leader_epoch": -1, "leader_epoch": 0},
            ]},
            {"topic": "u", "partitions": [
                {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0},
                {"partition": 1, "current_leader_epoch": 0, "leader_epoch": 0},
            ]},
        ],
    }  # fmt: skip
    answer = broker.call(OFFSET_FOR_LEADER_EPOCH, 3, body)
    got = [
        (t["topic"], p["partition"], *found(p)) for t in answer["topics"] for p in t["partitions"]
    ]
    assert got == [
        ("t", 0, ErrorCode.NONE, 0, 3),
        ("t", 3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
        ("u", 0, ErrorCode.NONE, 0, 0),  # led in epoch 0 from its (empty) start
        ("u", 1, ErrorCode.NONE, 0, 1),
    ]


def test_batches_carry_the_epoch_that_appended_them(broker):
    history(broker)
    records = fetch(broker, "t", 0)["records"]
    assert [(h.base_offset, h.partition_leader_epoch) for _, h in iter_batches(records)] == [
        (0, 0),
        (3, 2),
        (5, 5),
    ]


# -- across a restart --------------------------------------------------------------------
def _metadata_epoch(broker, topic: str = "t") -> int:
    body = {
        "topics": [{"name": topic}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    (t,) = broker.call(METADATA, 8, body)["topics"]
    return t["partitions"][0]["leader_epoch"]


def test_the_leader_epoch_survives_a_restart(tmp_path):
    first = InProcessBroker(tmp_path / "logs")
    history(first)
    assert _metadata_epoch(first) == 5
    first.state.replicas.logs.close()

    again = InProcessBroker(tmp_path / "logs")
    try:
        assert again.state.replicas.get("t", 0).leader_epoch == 5
        assert _metadata_epoch(again) == 5
        assert found(ask(again, "t", 2, current=5)) == (ErrorCode.NONE, 2, 5)
        assert found(ask(again, "t", 5, current=5)) == (ErrorCode.NONE, 5, 8)
        # ListOffsets: latest carries the partition's epoch, earliest the first epoch, a
        # lookup by time the epoch that appended the record found.
        offsets = {
            ts: list_offsets(again, "t", ts, epoch=5) for ts in (-1, -2, -3, 1001, 5001, 9000)
        }
        assert {ts: (p["offset"], p["leader_epoch"]) for ts, p in offsets.items()} == {
            -1: (8, 5),
            -2: (0, 0),
            -3: (7, 5),
            1001: (1, 0),
            5001: (4, 2),
            9000: (5, 5),
        }
        # The next append continues the epoch: no new entry.
        produce(again, "t", values(b"i"))
        assert again.state.replicas.get("t", 0).log.leader_epochs.entries == [
            (0, 0),
            (2, 3),
            (5, 5),
        ]
    finally:
        again.state.replicas.logs.close()


def test_a_partition_nothing_was_appended_to_starts_at_epoch_zero(tmp_path):
    first = InProcessBroker(tmp_path / "logs")
    create(first, "t")
    first.state.replicas.logs.close()
    again = InProcessBroker(tmp_path / "logs")
    try:
        assert _metadata_epoch(again) == 0
    finally:
        again.state.replicas.logs.close()
