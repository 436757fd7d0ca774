"""What tests against a cluster of broker processes share: waiting for what the cluster
does by itself, topics placed and in sync, reading a partition back, an idempotent
acks=all producer running while brokers die, and the replicas' log files.

Clusters themselves come from `broker.processes.Cluster` (fixtures in
tests/cluster/conftest.py and tests/conftest.py)."""

from __future__ import annotations

import threading
import time
import uuid
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.client.cluster import ClusterMetadata
from broker.client.producer import Producer as OurProducer
from broker.client.simple_consumer import SimpleConsumer
from broker.records.batch import iter_batches
from tests.helpers.confluent import consume

WAIT_S = 60.0  # deadlines for what a cluster does by itself (elections, catching up)

# Settings that make failovers quick to see in a test: a dead broker's session ends in
# 6 s, a follower that stopped fetching leaves the ISR in 4 s, and the last broker of a
# cluster to stop does not spend 5 s per attempt at a controlled shutdown.
FAST_FAILOVER = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "4000",
    "controlled.shutdown.retry.backoff.ms": "300",
}

# group.initial.rebalance.delay.ms off: a group's first members settle at once instead of
# 3 s after the first join (a schema registry's election at each start, say).
NO_GROUP_DELAY = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module", name="broker_overrides")
def broker_without_group_delay() -> dict[str, str]:
    """`broker_overrides` (tests/conftest.py) for packages whose only group is a schema
    registry's: its election need not wait the initial rebalance delay at each start.
    Imported by their conftest.py."""
    return dict(NO_GROUP_DELAY)


def fresh(prefix: str) -> str:
    """A topic name of the test's own."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def wait_for(condition, what: str = "condition", timeout_s: float = WAIT_S):
    """Poll `condition()` until it returns something truthy (and return it); fail after
    `timeout_s` naming `what`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:.0f}s")
        time.sleep(0.1)


def leaders(admin: AdminClient, topic: str) -> dict | None:
    """partition -> (leader, replicas, isr), once every partition has a leader."""
    md = admin.list_topics(topic, timeout=10).topics[topic]
    if md.error is not None or not md.partitions:
        return None
    found = {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in md.partitions.values()}
    return found if all(leader >= 0 for leader, _, _ in found.values()) else None


def in_sync(admin: AdminClient, topic: str, factor: int) -> dict | None:
    """Like `leaders`, once every partition has `factor` replicas in sync."""
    found = leaders(admin, topic)
    return found if found and all(len(isr) == factor for _, _, isr in found.values()) else None


def create_topic(cluster, topic: str, partitions: int = 1, factor: int = 3, config=None) -> dict:
    """Create `topic` (confluent-kafka's admin client) and wait until it is fully in sync;
    returns `leaders`."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, factor, config=config or {})])[topic].result(
        30
    )
    return wait_for(lambda: in_sync(admin, topic, factor), f"{topic} in sync")


def read_partition(bootstrap: str, topic: str) -> list[bytes]:
    """Every value of partition 0, from its start to its end."""
    return [m.value() for m in consume(bootstrap, topic, 1, 0, timeout_s=WAIT_S)]


def log_bytes(cluster, broker_id: int, topic: str, partition: int = 0) -> bytes:
    """The partition's segment files on one broker, concatenated; asserts they hold whole
    batches only (no torn tail)."""
    directory = Path(cluster.broker(broker_id).log_dir) / f"{topic}-{partition}"
    data = b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))
    end = 0
    for pos, header in iter_batches(data):
        end = pos + header.size
    assert end == len(data), f"a partial batch in broker {broker_id}'s log"
    return data


class Traffic:
    """An idempotent acks=all confluent-kafka producer writing numbered values to one
    partition (or to `partitions` partitions in turn) in a thread, as fast as it can or
    `rate` values a second; keeps what was acknowledged (and where it went) and every error
    the application saw (librdkafka retries the retriable ones itself)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partition: int = 0,
        *,
        partitions: int | None = None,
        rate: float | None = None,
    ) -> None:
        self.topic = topic
        self.partitions = [partition] if partitions is None else list(range(partitions))
        self.rate = rate
        self.acked: list[bytes] = []
        self.positions: list[tuple[int, int]] = []  # (partition, offset) of each acked value
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
            self.positions.append((msg.partition(), msg.offset()))

    def _run(self) -> None:
        i, started = 0, time.monotonic()
        while not self._stop.is_set():
            if self.rate is not None and i > self.rate * (time.monotonic() - started):
                self.producer.poll(0.005)
                continue
            try:
                self.producer.produce(
                    self.topic, value=b"%08d" % i,
                    partition=self.partitions[i % len(self.partitions)],
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

    def wait_acked(self, count: int, timeout_s: float = WAIT_S) -> None:
        wait_for(lambda: len(self.acked) >= count, f"{count} acknowledged writes", timeout_s)


# -- with our own client library (broker.client) ----------------------------------------------


def partition_state(bootstrap: str, topic: str, partition: int):
    """(leader, leader_epoch, isr) of `topic`-`partition`, from a fresh metadata request."""
    with ClusterMetadata(bootstrap) as meta:
        meta.refresh([topic])
        p = meta.topics[topic].partitions[partition]
        return p.leader, p.leader_epoch, sorted(p.isr)


def coordinator_of(bootstrap: str, key: str, key_type: int) -> int:
    """The broker coordinating a group or transactional id (FindCoordinator, which creates
    the internal topic on first use: retried until it has a leader)."""
    from broker.client.coordinator import GroupCoordinators
    from broker.protocol.errors import KafkaError as BrokerError

    deadline = time.monotonic() + WAIT_S
    with ClusterMetadata(bootstrap) as cluster:
        coordinators = GroupCoordinators(cluster, WAIT_S, key_type)
        while True:
            try:
                return coordinators.node(key)
            except BrokerError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def group_coordinated_elsewhere(bootstrap: str, prefix: str, avoid: int) -> str:
    """A group name (`prefix`-N) whose coordinator is not broker `avoid`. librdkafka cannot
    commit a transaction's offsets once its cached group coordinator left the metadata
    (docs/client-behaviour.md, section 6): a test killing a transaction coordinator keeps
    the copier's group elsewhere."""
    from broker.client.coordinator import GROUP_KEY_TYPE

    for i in range(50):
        group = f"{prefix}-{i}"
        if coordinator_of(bootstrap, group, GROUP_KEY_TYPE) != avoid:
            return group
    raise AssertionError(f"every offsets partition is led by broker {avoid}")


def fully_replicated(bootstrap: str, topic: str, partitions: int) -> bool:
    with ClusterMetadata(bootstrap) as meta:
        meta.refresh([topic])
        parts = meta.topics.get(topic)
        return (
            parts is not None
            and all(p.leader >= 0 and len(p.isr) == 3 for p in parts.partitions.values())
            and len(parts.partitions) == partitions
        )


def read_all(consumer: SimpleConsumer, topic: str, partition: int) -> tuple[list, set[int]]:
    """Every record of the partition up to its high watermark, in offset order, and the
    producer ids its batches carry."""
    records, producer_ids = [], set()
    offset = consumer.earliest_offset(topic, partition)
    end = consumer.latest_offset(topic, partition)
    while offset < end:
        result = consumer.fetch(topic, partition, offset)
        records += list(result.records())
        producer_ids |= {h.producer_id for _, h in iter_batches(result.records_bytes)}
        offset = result.next_offset
    return records, producer_ids


@contextmanager
def producing(producer: OurProducer, topic: str, count: int, every: int = 25):
    """Send `count` keyed records from a thread, a little at a time; yields (futures,
    progress event set once a third are sent and the first is acknowledged: a fault
    injected then lands while records flow, some acknowledged and most not, however
    slowly a loaded machine answers). Joined on exit."""
    futures = []
    third = threading.Event()

    def run():
        for i in range(count):
            futures.append(producer.send(topic, b"%07d" % i, key=b"%d" % (i % 31)))
            if i == count // 3:
                with suppress(Exception):  # the test's assertions say why
                    futures[0].result(timeout=WAIT_S)
                third.set()
            if i % every == 0:
                time.sleep(0.005)  # spread the records over what the test does meanwhile

    writer = threading.Thread(target=run, name="test-producer")
    writer.start()
    try:
        yield futures, third
    finally:
        writer.join(WAIT_S)
