"""A full disk under a leader (docs/contracts/log.md and cluster.md, "Log directory
failure"): broker 0's first log dir is an 8 MB tmpfs holding the partition it leads,
filled by an idempotent acks=all producer. The dir goes offline, the producer is told
KAFKA_STORAGE_ERROR (librdkafka retries it after a metadata refresh), the controller
moves the leadership, and everything acknowledged is read back from the new leader."""

from __future__ import annotations

import subprocess
import threading

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from tests.helpers.cluster import FAST_FAILOVER, fresh, in_sync, read_partition, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.clients]

VALUE_BYTES = 4096


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
    yield mount
    # Lazily: the cluster fixture stops broker 0 (which holds files there) after this.
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_log_dir_moves_leadership_and_loses_nothing(cluster_factory, small_disk, tmp_path):
    roomy = tmp_path / "roomy"
    cluster = cluster_factory(
        3,
        overrides=FAST_FAILOVER,
        # The tmpfs first: the one partition broker 0 gets goes to the emptiest dir, the first.
        broker_overrides={0: {"log.dirs": f"{small_disk},{roomy}"}},
    )
    topic = fresh("diskfull")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[0, 1, 2]])])[topic].result(30)
    wait_for(lambda: in_sync(admin, topic, 3), f"{topic} in sync")
    # The ISR is full from the creation on: broker 0 may not have made its log yet.
    placed = lambda: [d for d in (small_disk, roomy) if (d / f"{topic}-0").is_dir()]  # noqa: E731
    assert wait_for(placed, f"broker 0's log of {topic}-0") == [small_disk]

    seen_storage_errors: list[str] = []
    logged = threading.Lock()

    def librdkafka_log(record) -> None:
        message = record.getMessage()
        # librdkafka retries error 56 itself (actions Refresh,Retry,MsgNotPersisted) and
        # says so, by the error's description, only in its debug log.
        if "Disk error when trying to access log file on disk" in message:
            with logged:
                seen_storage_errors.append(message)

    acked: list[bytes] = []
    failed: list = []

    def delivered(err, msg) -> None:
        (failed.append(err) if err is not None else acked.append(msg.value()))

    logger = _Collect(librdkafka_log)
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "debug": "msg",  # librdkafka says why it retries a batch only at debug level
            "message.timeout.ms": 60000,
        },
        logger=logger,
    )
    # About 12 MB: more than the tmpfs holds.
    for i in range(3000):
        value = (b"%08d" % i).ljust(VALUE_BYTES, b".")
        while True:
            try:
                producer.produce(topic, value=value, partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(90) == 0

    assert seen_storage_errors, "the producer was never told KAFKA_STORAGE_ERROR"
    assert "Refresh,Retry" in seen_storage_errors[0]
    assert failed == [], failed
    state = wait_for(lambda: in_sync(admin, topic, 2), "the leadership moved off broker 0")
    leader, _, isr = state[0]
    assert leader != 0 and 0 not in isr
    # Broker 0 lives on, its replica offline in everyone's metadata (Metadata v5+).
    wait_for(lambda: _offline_replicas(cluster.bootstrap, topic) == [0], "replica 0 named offline")
    broker_log = (cluster.logs / "broker-0.log").read_text()
    assert f"log dir {small_disk} is offline" in broker_log
    values = read_partition(cluster.bootstrap, topic)
    assert len(values) == len(set(values)), "duplicates in the log"
    assert set(acked) == set(values) and len(acked) == 3000, "acknowledged writes lost"


def _offline_replicas(bootstrap: str, topic: str) -> list[int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        (described,) = admin.describe_topics([topic])
        return described["partitions"][0]["offline_replicas"]
    finally:
        admin.close()


class _Collect:
    """A logging.Logger stand-in for confluent-kafka's `logger`: hands each record on."""

    def __init__(self, sink) -> None:
        self.sink = sink

    def log(self, level, fmt, *args) -> None:
        self.sink(_Record(fmt % args if args else fmt))


class _Record:
    def __init__(self, message: str) -> None:
        self.message = message

    def getMessage(self) -> str:  # noqa: N802 (logging's name)
        return self.message
