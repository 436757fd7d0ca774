"""confluent-kafka (librdkafka), unmodified."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.clients


def _create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
    )
    futures[topic].result(10)


def _consume_all(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 20.0
) -> list:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused-assign-mode",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, eofs = [], set()
    import time

    deadline = time.monotonic() + timeout
    while (len(got) < expected or len(eofs) < partitions) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == -191:  # _PARTITION_EOF
                eofs.add(msg.partition())
                continue
            raise AssertionError(msg.error())
        got.append(msg)
    consumer.close()
    return got


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_producer_each_codec_consumer_assign(broker, codec):
    topic = f"ck-{codec}"
    _create(broker.bootstrap, topic, 2)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "compression.codec": codec,
            "linger.ms": 5,
            "enable.idempotence": True,
        }
    )
    errors = []
    for i in range(1000):
        producer.produce(
            topic,
            key=f"key-{i % 13}",
            value=f"{codec}-{i}".encode(),
            on_delivery=lambda err, msg: errors.append(err) if err else None,
        )
        producer.poll(0)
    assert producer.flush(20) == 0
    assert errors == []
    got = _consume_all(broker.bootstrap, topic, 2, 1000)
    assert sorted(m.value().decode() for m in got) == sorted(f"{codec}-{i}" for i in range(1000))
    # Per partition, offsets are dense.
    for p in (0, 1):
        offs = [m.offset() for m in got if m.partition() == p]
        assert offs == list(range(len(offs)))


def test_metadata_lists_broker_and_controller(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(timeout=10)
    assert list(md.brokers) == [0]
    assert md.controller_id == 0
    assert md.cluster_id


def test_offsets_for_times(broker):
    topic = "ck-times"
    _create(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(10):
        producer.produce(topic, value=b"x", partition=0, timestamp=base + i * 1000)
        producer.flush(10)  # one batch per record, so time lookups are exact
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "times"})
    (tp,) = consumer.offsets_for_times([TopicPartition(topic, 0, base + 4500)], timeout=10)
    assert tp.offset == 5
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    assert (low, high) == (0, 10)
    consumer.close()
