"""The group consumer on a real cluster (ZooKeeper, three brokers, RF=3): its group's
coordinator is killed (SIGKILL) or stopped (a controlled shutdown) while members consume
and commit. The group moves to the new leader of its __consumer_offsets partition; the
members find it, stay in (or rejoin) the group and go on from their committed offsets:
no record is lost, and what was committed before is not consumed again.
"""

from __future__ import annotations

import threading

import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.client.cluster import ClusterMetadata
from broker.client.coordinator import find_coordinator
from broker.client.group import GroupConsumer, TopicPartition
from broker.client.producer import Producer
from broker.client.simple_consumer import SimpleConsumer
from broker.processes import Cluster
from tests.helpers.cluster import FAST_FAILOVER, WAIT_S, fully_replicated, wait_for

TP = TopicPartition
PARTITIONS = 4

CLUSTER_SETTINGS = {
    **FAST_FAILOVER,
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}


@pytest.fixture
def cluster(tmp_path, zookeeper):
    with Cluster(tmp_path / "cluster", 3, zookeeper=zookeeper, overrides=CLUSTER_SETTINGS) as c:
        yield c


class Member:
    """One of our consumers polling on a thread of its own, committing what each poll
    returned before the next (so a record is consumed again only if its commit failed)."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer = GroupConsumer(
            bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            # Longer than a coordinator failover (the dead broker's ZooKeeper session,
            # 6 s, then the load of the offsets partition): members stay in the group.
            session_timeout_ms=20_000,
            heartbeat_interval_ms=500,
        )
        self.consumer.subscribe([topic])
        self.consumed: list[tuple[int, int]] = []
        self.failed_commits: list = []
        self.errors: list[Exception] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                records = self.consumer.poll(0.2)
                if records:
                    self.consumed += [(r.partition, r.offset) for r in records]
                    self._commit(records)
        except Exception as exc:
            self.errors.append(exc)

    def _commit(self, records) -> None:
        """Commit the polled records' next offsets; commit() finds a moved coordinator
        again and retries until its timeout. One that fails for good is kept: its records
        may be consumed again."""
        offsets: dict = {}
        for r in records:
            tp = (r.topic, r.partition)
            offsets[tp] = max(offsets.get(tp, 0), r.offset + 1)
        try:
            self.consumer.commit(offsets, timeout_s=WAIT_S)
        except Exception as exc:
            self.failed_commits.append((offsets, exc))

    def start(self) -> Member:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        self.consumer.close()


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    with Producer(bootstrap, linger_ms=2) as producer:
        futures = [
            producer.send(topic, b"%06d" % i, key=b"k%d" % i) for i in range(start, start + count)
        ]
        for f in futures:
            f.result(timeout=WAIT_S)


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    with SimpleConsumer(bootstrap) as s:
        return {p: s.latest_offset(topic, p) for p in range(PARTITIONS)}


def coordinator_of(bootstrap: str, group: str) -> int:
    with ClusterMetadata(bootstrap) as metadata:
        metadata.refresh([])
        return find_coordinator(metadata.any_connection(), group).node_id


def all_consumed(members: list[Member], ends: dict[int, int]) -> bool:
    got = {pair for m in members for pair in m.consumed}
    return all((p, o) in got for p, end in ends.items() for o in range(end))


@pytest.mark.parametrize("take_down", ["kill", "stop"])
def test_members_follow_their_group_to_a_new_coordinator(cluster, take_down):
    topic, group = "events", f"loaders-{take_down}"
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 3)], raise_errors=True)
    wait_for(lambda: fully_replicated(cluster.bootstrap, topic, PARTITIONS), "ISR of 3")
    produce(cluster.bootstrap, topic, 0, 200)

    members = [Member(cluster.bootstrap, group, topic).start() for _ in range(2)]
    try:
        wait_for(lambda: all_consumed(members, end_offsets(cluster.bootstrap, topic)), "first 200")
        coordinator = coordinator_of(cluster.bootstrap, group)
        getattr(cluster.broker(coordinator), take_down)()
        produce(cluster.bootstrap, topic, 200, 200)
        ends = end_offsets(cluster.bootstrap, topic)
        assert sum(ends.values()) == 400
        wait_for(lambda: all_consumed(members, ends), "records produced after the failover")
        assert coordinator_of(cluster.bootstrap, group) != coordinator
    finally:
        for m in members:
            m.stop()
    for m in members:
        assert m.errors == [], f"a member's poll failed: {m.errors}"
    # Every commit went through (retried across the failover), and what was committed
    # stayed committed: no record was consumed twice.
    assert [f for m in members for f in m.failed_commits] == []
    consumed = [pair for m in members for pair in m.consumed]
    assert len(consumed) == len(set(consumed)) == 400
    with GroupConsumer(cluster.bootstrap, group_id=group) as c:
        committed = c.committed([(topic, p) for p in range(PARTITIONS)])
    assert {tp.partition: om.offset for tp, om in committed.items()} == ends
