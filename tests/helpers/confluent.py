"""confluent-kafka (librdkafka) helpers shared by tests against our brokers."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, TopicPartition


def consume(bootstrap: str, topic: str, partitions: int, expected: int, timeout_s=30.0) -> list:
    """At least `expected` messages and every partition's end, from offset 0 (assign())."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "assign-only",
            "enable.auto.commit": False,  # nothing to commit to: no coordinator involved
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, eofs = [], set()
    deadline = time.monotonic() + timeout_s
    while (len(got) < expected or len(eofs) < partitions) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                eofs.add(msg.partition())
                continue
            raise AssertionError(msg.error())
        got.append(msg)
    consumer.close()
    return got
