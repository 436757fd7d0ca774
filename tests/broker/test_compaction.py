"""Log compaction in a running broker, with real clients: keyed updates and tombstones
produced by kafka-python and librdkafka, cleaned by the broker's cleaner thread, consumed
back by both (only the latest value per key; tombstones until delete.retention.ms, then
gone), the same after a restart; a record without a key is refused."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import InvalidRecordError

from broker.client.admin import AdminClient, NewTopic
from broker.log.checkpoint import CLEANER_OFFSET_FILE, read_checkpoint
from tests.helpers.cluster import wait_for
from tests.helpers.confluent import consume

RETENTION_MS = 4_000
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": "2048",
    "segment.ms": "300",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": str(RETENTION_MS),
}
BROKER = {"log.cleaner.backoff.ms": "100", "log.segment.delete.delay.ms": "0"}


def latest_by_kafka_python(bootstrap: str, topic: str) -> tuple[dict, list[int]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=1500)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning()
    messages = list(consumer)
    consumer.close()
    return {m.key: m.value for m in messages}, [m.offset for m in messages]


def latest_by_librdkafka(bootstrap: str, topic: str) -> tuple[dict, list[int]]:
    messages = consume(bootstrap, topic, 1, 0)
    return {m.key(): m.value() for m in messages}, [m.offset() for m in messages]


def roll(bootstrap: str, topic: str) -> None:
    """A write after segment.ms: the segment holding everything before it is sealed, so
    the cleaner may clean it (the active segment is never cleaned)."""
    time.sleep(0.4)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    producer.send(topic, key=b"marker", value=b"%d" % time.time_ns(), partition=0).get(10)
    producer.close()


def test_a_compacted_topic_serves_the_latest_value_per_key(broker_factory):
    b = broker_factory(BROKER)
    with AdminClient(b.bootstrap) as admin:
        admin.create_topics([NewTopic("profiles", 1, configs=TOPIC_CONFIG)])
    model: dict[bytes, bytes | None] = {}
    python_producer = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=5)
    rdkafka_producer = ConfluentProducer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for round_ in range(12):
        for user in range(30):
            key = b"user-%02d" % user
            value = b"%s-v%d-" % (key, round_) + b"x" * 40
            if round_ % 2:
                python_producer.send("profiles", key=key, value=value, partition=0)
            else:
                rdkafka_producer.produce("profiles", key=key, value=value, partition=0)
            model[key] = value
        rdkafka_producer.flush(10)
        python_producer.flush(10)
    for user in range(0, 30, 3):  # delete every third user
        key = b"user-%02d" % user
        python_producer.send("profiles", key=key, value=None, partition=0)
        model[key] = None
    python_producer.flush(10)
    with pytest.raises(InvalidRecordError):
        python_producer.send("profiles", value=b"no key", partition=0).get(10)
    python_producer.close()
    produced = 12 * 30 + 10
    roll(b.bootstrap, "profiles")

    def cleaned():
        latest, offsets = latest_by_kafka_python(b.bootstrap, "profiles")
        latest.pop(b"marker", None)
        return len(offsets) <= 31 + 1 and latest == model and (latest, offsets)

    latest, offsets = wait_for(cleaned, "the cleaner to keep one record per key", 30)
    assert offsets == sorted(offsets) and offsets[-1] >= produced  # offsets kept, with gaps
    by_rdkafka, rd_offsets = latest_by_librdkafka(b.bootstrap, "profiles")
    by_rdkafka.pop(b"marker", None)
    assert by_rdkafka == model and rd_offsets == offsets
    checkpoint = read_checkpoint(b.log_dir / CLEANER_OFFSET_FILE)
    assert checkpoint[("profiles", 0)] >= produced

    # Tombstones go once delete.retention.ms has passed since the cleaner first saw them.
    alive = {k: v for k, v in model.items() if v is not None}

    def tombstones_gone():
        latest, _ = latest_by_kafka_python(b.bootstrap, "profiles")
        latest.pop(b"marker", None)
        return latest == alive

    wait_for(tombstones_gone, "tombstones to go", RETENTION_MS / 1000 + 30)
    b.stop()
    b.start()
    again, _ = latest_by_librdkafka(b.bootstrap, "profiles")
    again.pop(b"marker", None)
    assert again == alive
