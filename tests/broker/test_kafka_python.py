"""kafka-python 3, unmodified: its default producer is idempotent with acks=all."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

pytestmark = pytest.mark.clients


def test_admin_create_topics_and_describe(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic("kp-admin", num_partitions=4, replication_factor=1)])
        assert "kp-admin" in admin.list_topics()
        (desc,) = admin.describe_topics(["kp-admin"])
        assert sorted(p["partition_index"] for p in desc["partitions"]) == [0, 1, 2, 3]
    finally:
        admin.close()


def test_default_idempotent_producer_and_assign_consumer(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("kp-roundtrip", num_partitions=2, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    sent = []
    for i in range(500):
        fut = producer.send("kp-roundtrip", key=f"k{i % 7}".encode(), value=f"value-{i}".encode())
        sent.append(fut)
    producer.flush()
    metas = [f.get(timeout=10) for f in sent]
    producer.close()
    by_partition: dict[int, list[int]] = {}
    for m in metas:
        by_partition.setdefault(m.partition, []).append(m.offset)
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets))), "offsets are dense and in send order"

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000
    )
    consumer.assign([TopicPartition("kp-roundtrip", 0), TopicPartition("kp-roundtrip", 1)])
    consumer.seek_to_beginning()
    got = sorted(m.value.decode() for m in consumer)
    consumer.close()
    assert got == sorted(f"value-{i}" for i in range(500))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_produce_and_consume(broker, codec):
    topic = f"kp-{codec}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec)
    for i in range(200):
        producer.send(topic, value=f"{codec}-{i}".encode() * 3, partition=0)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=3000)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    values = [m.value for m in consumer]
    consumer.close()
    assert values == [f"{codec}-{i}".encode() * 3 for i in range(200)]
