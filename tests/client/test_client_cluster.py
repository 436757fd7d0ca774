"""Our client library against a real cluster: ZooKeeper, three brokers, RF=3, with
leaders killed (SIGKILL) and stopped (SIGTERM, a controlled shutdown) under it.

Each test owns its cluster (start-up takes about a second): they kill and stop brokers.
A broker killed with SIGKILL is noticed when its ZooKeeper session ends
(`zookeeper.session.timeout.ms`, 6 s here); a stopped one hands its leaderships over
before it goes.
"""

from __future__ import annotations

import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.client.cluster import ClusterMetadata
from broker.client.producer import Producer
from broker.client.simple_consumer import SimpleConsumer
from broker.processes import Cluster
from tests.helpers.cluster import (
    FAST_FAILOVER,
    WAIT_S,
    fully_replicated,
    partition_state,
    producing,
    read_all,
    wait_for,
)

CLUSTER_SETTINGS = {**FAST_FAILOVER, "default.replication.factor": "3", "min.insync.replicas": "2"}


@pytest.fixture
def cluster(tmp_path, zookeeper):
    """Three brokers of the test's own (they are killed and stopped), RF=3."""
    with Cluster(tmp_path / "cluster", 3, zookeeper=zookeeper, overrides=CLUSTER_SETTINGS) as c:
        yield c


@pytest.mark.parametrize("take_down", ["kill", "stop"])
def test_idempotent_producer_across_a_leader_taken_down(cluster, take_down):
    """acks=all, idempotent: the leader of partition 0 is killed (SIGKILL) or stopped
    (SIGTERM, a controlled shutdown) while records flow. Every record is acknowledged, and
    each is in the log exactly once, where its acknowledgement says."""
    topic, partitions, count = f"{take_down}-leader", 3, 6000
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 3)], raise_errors=True)
    wait_for(lambda: fully_replicated(cluster.bootstrap, topic, partitions), "ISR of 3")
    leader, epoch, _ = partition_state(cluster.bootstrap, topic, 0)

    producer = Producer(cluster.bootstrap, linger_ms=2, batch_size=8192)
    assert producer.acks == -1 and producer.idempotent  # the defaults
    with producing(producer, topic, count) as (futures, third):
        assert third.wait(WAIT_S)
        getattr(cluster.broker(leader), take_down)()
        acknowledged_at_kill = sum(f.done() for f in list(futures))
    producer.flush(timeout=WAIT_S * 2)
    metas = [f.result(timeout=0) for f in futures]  # every record acknowledged, none failed
    producer.close()
    assert 0 < acknowledged_at_kill < count, "the kill happened while records flowed"

    new_leader, new_epoch, isr = partition_state(cluster.bootstrap, topic, 0)
    assert new_leader != leader and new_epoch > epoch and leader not in isr

    with SimpleConsumer(cluster.bootstrap, timeout_s=WAIT_S) as consumer:
        read = {p: read_all(consumer, topic, p) for p in range(partitions)}
    stored = {p: records for p, (records, _) in read.items()}
    producer_ids = set().union(*(ids for _, ids in read.values()))
    assert len(producer_ids) == 1, "one producer id throughout: sequences survived the failover"
    values = [r.value for records in stored.values() for r in records]
    assert len(values) == count, "records were lost or duplicated"
    assert set(values) == {b"%07d" % i for i in range(count)}
    by_offset = {(p, r.offset): r.value for p, records in stored.items() for r in records}
    for i, meta in enumerate(metas):
        assert by_offset[(meta.partition, meta.offset)] == b"%07d" % i, "acknowledged where it is"
    for p, records in stored.items():
        assert [r.value for r in records] == sorted(r.value for r in records), f"order of {p}"


def produce_acknowledged(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    with Producer(bootstrap, linger_ms=2, batch_size=4096) as producer:
        futures = [producer.send(topic, b"%07d" % i, partition=partition) for i in range(count)]
        producer.flush(timeout=WAIT_S)
        for f in futures:
            f.result(timeout=0)


def fetch_some(consumer: SimpleConsumer, topic: str, offset: int, records: int) -> tuple[list, int]:
    """At least `records` records from `offset` (small fetches), and the offset after them."""
    values = []
    while len(values) < records:
        result = consumer.fetch(topic, 0, offset, max_bytes=2048)
        values += [r.value for r in result.records()]
        offset = result.next_offset
    return values, offset


def test_simple_consumer_across_a_follower_and_a_leader_stopped(cluster):
    """A SimpleConsumer bootstrapped from the leader alone reads one partition while first a
    follower, then the leader is stopped (SIGTERM: a controlled shutdown each).

    The follower leaving the ISR bumps the leader epoch under an unchanged leader: the
    consumer's next Fetch carries the old epoch, is fenced, and the consumer refreshes its
    metadata -- only the epoch it sends can tell it. The leader's shutdown moves the
    leadership to the last broker, which the consumer finds through the metadata it has,
    its only bootstrap broker being gone. It reads every record once, in order."""
    topic, count = "stopped", 3000
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 3)], raise_errors=True)
    produce_acknowledged(cluster.bootstrap, topic, count)
    wait_for(lambda: fully_replicated(cluster.bootstrap, topic, 1), "ISR of 3")
    leader, epoch, isr = partition_state(cluster.bootstrap, topic, 0)
    follower = next(b for b in isr if b != leader)
    expected = [b"%07d" % i for i in range(count)]

    with SimpleConsumer(cluster.broker(leader).bootstrap, timeout_s=WAIT_S) as consumer:
        values, offset = fetch_some(consumer, topic, 0, count // 3)
        assert consumer.cluster.topics[topic].partitions[0].leader_epoch == epoch

        cluster.broker(follower).stop()
        same_leader, fenced_epoch, isr = partition_state(cluster.broker(leader).bootstrap, topic, 0)
        assert same_leader == leader and fenced_epoch > epoch and follower not in isr
        more, offset = fetch_some(consumer, topic, offset, count // 3)
        values += more
        # Nothing but the fenced Fetch made the consumer look at the metadata again.
        assert consumer.cluster.topics[topic].partitions[0].leader_epoch >= fenced_epoch

        cluster.broker(leader).stop()
        assert consumer.latest_offset(topic, 0) == count  # ListOffsets finds the new leader
        values += fetch_some(consumer, topic, offset, count - len(values))[0]
        new_leader = consumer.cluster.leader_for(topic, 0)
    assert new_leader not in (leader, follower)
    assert values == expected


def test_admin_follows_the_controller(cluster):
    """Bootstrapped from a broker that is not the controller, the AdminClient creates and
    deletes topics through the controller; after the controller is killed, the same client
    finds the next one and goes on."""
    with ClusterMetadata(cluster.bootstrap) as meta:
        controller = meta.controller_id
    other = next(i for i in range(3) if i != controller)
    with AdminClient(cluster.broker(other).bootstrap) as admin:
        assert admin.cluster.controller_id == controller
        assert admin.create_topics([NewTopic("admin-a", 4, 3)], raise_errors=True) == {"admin-a": 0}
        (desc,) = admin.describe_topics(["admin-a"]).values()
        assert all(len(p.replicas) == 3 and p.leader in p.replicas for p in desc.partitions)
        assert admin.delete_topics(["admin-a"], raise_errors=True) == {"admin-a": 0}
        wait_for(lambda: "admin-a" not in admin.list_topics(), "topic deleted")

        cluster.broker(controller).kill()
        # Two brokers left: a topic of RF 2 can be placed once the new controller has
        # noticed the death (RF 3 would be refused, INVALID_REPLICATION_FACTOR).
        assert admin.create_topics([NewTopic("admin-b", 2, 2)], raise_errors=True) == {"admin-b": 0}
        assert admin.cluster.controller_id not in (controller, -1)
        (desc,) = admin.describe_topics(["admin-b"]).values()
        assert all(controller not in p.replicas for p in desc.partitions)
        assert admin.delete_topics(["admin-b"], raise_errors=True) == {"admin-b": 0}
