"""Losing brokers: a leader killed under an idempotent acks=all producer, a returning
leader whose log diverged, the controller killed, a controlled shutdown, and too few
in-sync replicas. Each test owns its cluster (it kills or stops brokers)."""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.client.cluster import ClusterMetadata
from tests.helpers.cluster import (
    FAST_FAILOVER,
    Traffic,
    create_topic,
    fresh,
    in_sync,
    leaders,
    log_bytes,
    read_partition,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.clients]


def test_kill_the_leader_under_an_idempotent_acks_all_producer(cluster_factory):
    """Every acknowledged write survives, exactly once; the producer sees no error."""
    cluster = cluster_factory(3, overrides=FAST_FAILOVER)
    topic = fresh("failover")
    placed = create_topic(cluster, topic)
    with Traffic(cluster.bootstrap, topic) as traffic:
        traffic.wait_acked(2000)
        leader = placed[0][0]
        cluster.kill(leader)
        acked_at_kill = len(traffic.acked)
        traffic.wait_acked(acked_at_kill + 2000, timeout_s=90)  # on the new leader
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    after = wait_for(lambda: leaders(admin, topic), "a new leader")
    assert after[0][0] != leader and leader not in after[0][2]
    values = read_partition(cluster.bootstrap, topic)
    assert traffic.errors == []
    assert len(values) == len(set(values)), "duplicates in the log"
    assert set(traffic.acked) <= set(values), "acknowledged writes lost"
    assert values == sorted(values)  # one producer, one partition: in order


def test_a_returning_leader_truncates_what_no_follower_had(cluster_factory):
    """The leader appends a batch its followers never fetch (they are paused), dies; after
    a new leader took writes, the old one returns, truncates at the leader-epoch boundary
    and copies the rest: the replicas' logs are byte-identical below the high watermark."""
    cluster = cluster_factory(3, overrides=FAST_FAILOVER)
    topic = fresh("diverge")
    placed = create_topic(cluster, topic)
    leader = placed[0][0]
    followers = [b for b in cluster.ids if b != leader]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce(topic, value=b"committed-%d" % i, partition=0)
    assert producer.flush(30) == 0
    for f in followers:  # they stop fetching (and heartbeating) for a moment
        os.kill(cluster.broker(f).proc.pid, 19)  # SIGSTOP
    # A fetch of theirs may be waiting at the leader: let it expire empty (it waits at most
    # replica.fetch.wait.max.ms), or the leader would answer it with the batch below.
    time.sleep(1.5)
    try:
        lonely = Producer({"bootstrap.servers": cluster.broker(leader).bootstrap, "acks": 1})
        for i in range(10):
            lonely.produce(topic, value=b"unreplicated-%d" % i, partition=0)
        assert lonely.flush(10) == 0  # acks=1: in the leader's log only
        cluster.kill(leader)
    finally:
        for f in followers:
            os.kill(cluster.broker(f).proc.pid, 18)  # SIGCONT
    admin = AdminClient(
        {"bootstrap.servers": ",".join(cluster.broker(f).bootstrap for f in followers)}
    )
    wait_for(lambda: (found := leaders(admin, topic)) and found[0][0] in followers, "new leader")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(50):
        producer.produce(topic, value=b"new-leader-%d" % i, partition=0)
    assert producer.flush(60) == 0
    cluster.restart(leader)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    wait_for(lambda: in_sync(admin, topic, 3), "the old leader back in the ISR")
    values = read_partition(cluster.bootstrap, topic)
    assert not any(v.startswith(b"unreplicated") for v in values)
    assert values[:100] == [b"committed-%d" % i for i in range(100)]
    assert values[100:] == [b"new-leader-%d" % i for i in range(50)]
    # Byte-identical logs: the same batches, offsets, epochs and CRCs on every replica.
    logs = [log_bytes(cluster, b, topic) for b in cluster.ids]
    assert logs[0] == logs[1] == logs[2]


def test_the_controller_killed_another_takes_over(cluster_factory):
    cluster = cluster_factory(3, overrides=FAST_FAILOVER)
    old = cluster.controller()
    cluster.kill(old)
    (new,) = wait_for(
        lambda: (c := cluster.controller()) is not None and c != old and (c,),
        "a new controller",
    )
    survivors = ",".join(cluster.broker(b).bootstrap for b in cluster.ids if b != old)
    admin = AdminClient({"bootstrap.servers": survivors})
    topic = fresh("after-controller")
    admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(30)
    placed = wait_for(lambda: leaders(admin, topic), "leaders")
    assert all(old not in replicas for _, replicas, _ in placed.values())
    assert admin.list_topics(timeout=10).controller_id == new


def test_controlled_shutdown_moves_leadership_with_only_retriable_errors(cluster_factory):
    cluster = cluster_factory(3, overrides=FAST_FAILOVER)
    topic = fresh("controlled")
    placed = create_topic(cluster, topic, partitions=3)
    with Traffic(cluster.bootstrap, topic) as traffic:
        traffic.wait_acked(1000)
        leader = placed[0][0]
        started = time.monotonic()
        assert cluster.broker(leader).stop() == 0  # SIGTERM: a clean exit
        stopped_in = time.monotonic() - started
        acked = len(traffic.acked)
        traffic.wait_acked(acked + 1000, timeout_s=30)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    after = wait_for(lambda: leaders(admin, topic), "leaders")
    assert all(leader_id != leader for leader_id, _, _ in after.values())
    assert traffic.errors == []
    values = read_partition(cluster.bootstrap, topic)
    assert len(values) == len(set(values)) and set(traffic.acked) <= set(values)
    assert stopped_in < 30
    log_text = cluster.broker(leader).log_text()
    assert "controlled shutdown done" in log_text


def test_min_insync_replicas_with_two_of_three_brokers_down(cluster_factory):
    cluster = cluster_factory(3, overrides={**FAST_FAILOVER, "min.insync.replicas": "2"})
    topic = fresh("min-isr")
    placed = create_topic(cluster, topic)
    leader = placed[0][0]
    for broker_id in cluster.ids:
        if broker_id != leader:
            cluster.broker(broker_id).stop()
    admin = AdminClient({"bootstrap.servers": cluster.broker(leader).bootstrap})
    wait_for(lambda: (found := leaders(admin, topic)) and found[0][2] == [leader], "ISR of 1")
    # kafka-python with retries off shows the broker's error (librdkafka retries it, as
    # it is retriable, until its message timeout).
    from kafka import KafkaProducer
    from kafka.errors import NotEnoughReplicasError

    strict = KafkaProducer(
        bootstrap_servers=cluster.broker(leader).bootstrap,
        acks="all",
        retries=0,
        enable_idempotence=False,
    )
    with pytest.raises(NotEnoughReplicasError):
        strict.send(topic, b"refused", partition=0).get(15)
    strict.close()
    relaxed = Producer({"bootstrap.servers": cluster.broker(leader).bootstrap, "acks": "1"})
    results: list = []
    relaxed.produce(topic, value=b"x", partition=0, on_delivery=lambda e, m: results.append(e))
    relaxed.flush(15)
    assert results == [None]
    consumer = Consumer({"bootstrap.servers": cluster.broker(leader).bootstrap, "group.id": "g"})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.close()
    assert (low, high) == (0, 1)  # only the acks=1 write


def test_a_new_controller_takes_dead_brokers_out_of_the_isrs(cluster_factory):
    """The controller is killed. It followed partitions led by the other two brokers; the
    next controller takes it out of their ISRs, as it does for any broker that dies while
    a controller watches: otherwise acks=all writes there would wait for the dead broker
    until the leader gives up on it (never here: replica.lag.time.max.ms is 10 minutes)."""
    cluster = cluster_factory(3, overrides={**FAST_FAILOVER, "replica.lag.time.max.ms": "600000"})
    topic = fresh("new-controller")
    create_topic(cluster, topic, partitions=3)
    controller = cluster.controller()
    cluster.kill(controller)
    survivor = next(b for b in cluster.ids if b != controller)

    def dead_broker_out_of_every_isr() -> bool:
        with ClusterMetadata(cluster.broker(survivor).bootstrap) as meta:
            meta.refresh([topic])
            if topic not in meta.topics:  # asked while the answering broker had no leader yet
                return False
            parts = meta.topics[topic].partitions.values()
            return meta.controller_id not in (-1, controller) and all(
                controller not in p.isr and p.leader != controller for p in parts
            )

    wait_for(dead_broker_out_of_every_isr, "the dead controller out of the ISRs", 30)
