"""Leader epochs with real clients against a broker process: OffsetForLeaderEpoch encoded
and decoded by kafka-python at every version, epochs that survive a restart, and
librdkafka finding where its position diverges from the log (KIP-320)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as RdTopicPartition
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest

from broker.client.connection import BrokerConnection
from broker.log import Log, LogConfig
from broker.protocol.apis import OFFSET_FOR_LEADER_EPOCH
from broker.protocol.errors import ErrorCode
from tests.helpers.log_batches import append, batch

pytestmark = pytest.mark.clients

Partition = OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    for i in range(count):
        producer.send(topic, value=b"v%d" % i, partition=0).get(timeout=10)
    producer.close()


def _ask(admin: KafkaAdminClient, topic: str, epoch: int, version=None, current=-1, partition=0):
    """One OffsetForLeaderEpoch through kafka-python's own connection; version None lets
    kafka-python pick from our ApiVersions (its v4 meets our v3)."""
    cls = OffsetForLeaderEpochRequest if version is None else OffsetForLeaderEpochRequest[version]
    request = cls(
        replica_id=-1,
        topics=[
            (
                topic,
                [Partition(partition=partition, current_leader_epoch=current, leader_epoch=epoch)],
            )
        ],
    )

    async def send():
        return await admin._manager.send(request, node_id=0)

    response = admin._manager.run(send)
    assert response.API_VERSION == (3 if version is None else version)
    ((name, (answer,)),) = [(t.topic, t.partitions) for t in response.topics]
    assert (name, answer.partition) == (topic, partition)
    return answer.error_code, answer.leader_epoch, answer.end_offset


@pytest.mark.parametrize("version", [None, 0, 1, 2, 3])
def test_kafka_python_asks_at_every_version(broker, version):
    topic = f"ep-kp-{version}"
    _produce(broker.bootstrap, topic, 3)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        # v0 answers no epoch: kafka-python reads its default, -1.
        assert _ask(admin, topic, 0, version) == (0, 0 if version != 0 else -1, 3)
        assert _ask(admin, topic, 1, version) == (0, -1, -1)
        unknown = _ask(admin, "ep-no-such-topic", 0, version)
        assert unknown[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if version is None or version >= 2:
            assert _ask(admin, topic, 0, version, current=0) == (0, 0, 3)
            assert _ask(admin, topic, 0, version, current=1)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
    finally:
        admin.close()


def test_our_connection_asks_as_a_follower_does(broker):
    """The replica fetcher's path: broker.client's BrokerConnection, v3, a broker id."""
    _produce(broker.bootstrap, "ep-follower", 4)
    host, port = broker.bootstrap.split(":")
    with BrokerConnection(host, int(port)) as conn:
        assert conn.version_for(OFFSET_FOR_LEADER_EPOCH) == 3
        body = {
            "replica_id": 1,
            "topics": [{"topic": "ep-follower", "partitions": [
                {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0}
            ]}],
        }  # fmt: skip
        (topic,) = conn.request(OFFSET_FOR_LEADER_EPOCH, body)["topics"]
    assert topic["partitions"] == [
        {"error_code": 0, "partition": 0, "leader_epoch": 0, "end_offset": 4}
    ]


def test_epochs_survive_a_restart_and_librdkafka_finds_the_divergence(broker_factory, tmp_path):
    log_dir = tmp_path / "logs"
    first = broker_factory(log_dir=log_dir)
    _produce(first.bootstrap, "ep", 5)  # offsets 0-4, epoch 0
    first.stop()
    # Offsets 5-9 appended by the leader of epoch 3 (as a cluster's history leaves them).
    log = Log.open(log_dir / "ep-0", "ep", 0, LogConfig())
    for i in range(5):
        append(log, batch(1, tag=i), epoch=3)
    log.close()

    again = broker_factory(log_dir=log_dir, port=first.port)
    admin = KafkaAdminClient(bootstrap_servers=again.bootstrap)
    try:
        (described,) = admin.describe_topics(["ep"])
        epochs = {p["partition_index"]: p["leader_epoch"] for p in described["partitions"]}
        assert epochs[0] == 3
        assert _ask(admin, "ep", 0, current=3) == (0, 0, 5)
        assert _ask(admin, "ep", 3, current=3) == (0, 3, 10)
        assert _ask(admin, "ep", 2, current=0)[0] == ErrorCode.FENCED_LEADER_EPOCH
    finally:
        admin.close()

    # A consumer positioned at offset 8 believing epoch 0 appended it: librdkafka asks
    # where epoch 0 ends (5), sees its position is past it and goes back there.
    consumer = Consumer(
        {
            "bootstrap.servers": again.bootstrap,
            "group.id": "unused-assign-mode",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([RdTopicPartition("ep", 0, 0)])
        got = _poll(consumer, 1)
        assert got == [(0, 0)]  # the batch's partitionLeaderEpoch
        consumer.seek(RdTopicPartition("ep", 0, 8, leader_epoch=0))
        assert _poll(consumer, 5) == [(5, 3), (6, 3), (7, 3), (8, 3), (9, 3)]
    finally:
        consumer.close()


def _poll(consumer: Consumer, count: int, timeout_s: float = 20.0) -> list[tuple[int, int]]:
    """(offset, leader epoch) of the next `count` messages."""
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert not msg.error(), msg.error()
        got.append((msg.offset(), msg.leader_epoch()))
    return got
