"""Losing brokers: a leader killed under an idempotent acks=all producer, a returning
leader whose log diverged, the controller killed, a controlled shutdown, and too few
in-sync replicas. Each test owns its cluster (it kills or stops brokers)."""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.records.batch import iter_batches
from tests.cluster.test_cluster_clients import consume, leaders, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.clients]

FAST_FAILOVER = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "4000"}


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def create(cluster, topic: str, partitions: int = 1, factor: int = 3, config=None) -> dict:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, factor, config=config or {})])[topic].result(
        30
    )
    return wait_for(lambda: _full_isr(admin, topic, factor), what=f"{topic} in sync")


def _full_isr(admin, topic, factor):
    found = leaders(admin, topic)
    return found if found and all(len(isr) == factor for _, _, isr in found.values()) else None


class Traffic:
    """An idempotent acks=all producer writing numbered values to one partition in a
    thread; keeps what was acknowledged and every error the application saw."""

    def __init__(self, bootstrap: str, topic: str, partition: int = 0) -> None:
        self.topic, self.partition = topic, partition
        self.acked: list[bytes] = []
        self.errors: list[KafkaError] = []
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 120000,
            }
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.append(msg.value())

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(
                    self.topic, value=b"%08d" % i, partition=self.partition,
                    on_delivery=self._delivered,
                )  # fmt: skip
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.001)

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        assert self.producer.flush(120) == 0

    def wait_acked(self, count: int, timeout_s: float = 60.0) -> None:
        wait_for(lambda: len(self.acked) >= count, timeout_s, f"{count} acknowledged writes")


def read_partition(bootstrap: str, topic: str) -> list[bytes]:
    """Every value of partition 0, from the start to the end."""
    return [m.value() for m in consume(bootstrap, topic, 1, 0, timeout_s=60)]


def test_kill_the_leader_under_an_idempotent_acks_all_producer(cluster_factory):
    """Every acknowledged write survives, exactly once; the producer sees no error."""
    cluster = cluster_factory(3, overrides=FAST_FAILOVER)
    topic = fresh("failover")
    placed = create(cluster, topic)
    with Traffic(cluster.bootstrap, topic) as traffic:
        traffic.wait_acked(2000)
        leader = placed[0][0]
        cluster.kill(leader)
        acked_at_kill = len(traffic.acked)
        traffic.wait_acked(acked_at_kill + 2000, timeout_s=90)  # on the new leader
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    after = wait_for(lambda: leaders(admin, topic), what="a new leader")
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
    placed = create(cluster, topic)
    leader = placed[0][0]
    followers = [b for b in cluster.ids if b != leader]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce(topic, value=b"committed-%d" % i, partition=0)
    assert producer.flush(30) == 0
    for f in followers:  # they stop fetching (and heartbeating) for a moment
        os.kill(cluster.broker(f).proc.pid, 19)  # SIGSTOP
    # A fetch a follower sent just before it stopped waits at the leader for new data (up
    # to replica.fetch.wait.max.ms, 500 ms): the batch below would answer it, into the
    # stopped follower's socket, and it would append it on SIGCONT, legitimately. Let such
    # fetches expire empty first.
    time.sleep(1.0)
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
    wait_for(
        lambda: (found := leaders(admin, topic)) and found[0][0] in followers, 60, "new leader"
    )
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(50):
        producer.produce(topic, value=b"new-leader-%d" % i, partition=0)
    assert producer.flush(60) == 0
    cluster.restart(leader)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    wait_for(lambda: _full_isr(admin, topic, 3), 60, "the old leader back in the ISR")
    values = read_partition(cluster.bootstrap, topic)
    assert not any(v.startswith(b"unreplicated") for v in values)
    assert values[:100] == [b"committed-%d" % i for i in range(100)]
    assert values[100:] == [b"new-leader-%d" % i for i in range(50)]
    # Byte-identical logs: the same batches, offsets, epochs and CRCs on every replica.
    logs = [_log_bytes(cluster, b, topic) for b in cluster.ids]
    assert logs[0] == logs[1] == logs[2]


def _log_bytes(cluster, broker_id: int, topic: str) -> bytes:
    directory = Path(cluster.broker(broker_id).log_dir) / f"{topic}-0"
    data = b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))
    # Every byte belongs to a whole batch (no torn tail left behind).
    end = 0
    for pos, header in iter_batches(data):
        end = pos + header.size
    assert end == len(data)
    return data


def test_the_controller_killed_another_takes_over(cluster_factory):
    cluster = cluster_factory(3, overrides=FAST_FAILOVER)
    old = cluster.controller()
    cluster.kill(old)
    # A tuple: broker 0 as the new controller must not read as "not yet".
    (new,) = wait_for(lambda: (c := cluster.controller()) not in (None, old) and (c,), 60)
    survivors = ",".join(cluster.broker(b).bootstrap for b in cluster.ids if b != old)
    admin = AdminClient({"bootstrap.servers": survivors})
    topic = fresh("after-controller")
    admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(30)
    placed = wait_for(lambda: leaders(admin, topic), what="leaders")
    assert all(old not in replicas for _, replicas, _ in placed.values())
    assert admin.list_topics(timeout=10).controller_id == new


def test_controlled_shutdown_moves_leadership_with_only_retriable_errors(cluster_factory):
    cluster = cluster_factory(3, overrides=FAST_FAILOVER)
    topic = fresh("controlled")
    placed = create(cluster, topic, partitions=3)
    with Traffic(cluster.bootstrap, topic) as traffic:
        traffic.wait_acked(1000)
        leader = placed[0][0]
        started = time.monotonic()
        assert cluster.broker(leader).stop() == 0  # SIGTERM: a clean exit
        stopped_in = time.monotonic() - started
        acked = len(traffic.acked)
        traffic.wait_acked(acked + 1000, timeout_s=30)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    after = wait_for(lambda: leaders(admin, topic), what="leaders")
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
    placed = create(cluster, topic)
    leader = placed[0][0]
    for broker_id in cluster.ids:
        if broker_id != leader:
            cluster.broker(broker_id).stop()
    admin = AdminClient({"bootstrap.servers": cluster.broker(leader).bootstrap})
    wait_for(lambda: (found := leaders(admin, topic)) and found[0][2] == [leader], 60, "ISR of 1")
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
