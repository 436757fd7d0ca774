"""Segment roll and retention with small limits, through the running broker."""

from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def test_roll_by_size_and_retention_by_bytes(broker_factory):
    b = broker_factory(
        {
            "log.segment.bytes": "4096",
            "log.retention.bytes": "20000",
            "log.retention.check.interval.ms": "200",
            "log.segment.delete.delay.ms": "0",
        }
    )
    producer = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=0)
    for i in range(300):
        producer.send("small", value=f"{i:05d}".encode() * 20, partition=0).get(timeout=10)
    producer.close()
    part_dir = b.log_dir / "small-0"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        segments = sorted(part_dir.glob("*.log"))
        total = sum(p.stat().st_size for p in segments)
        if total <= 20000 + 4096:
            break
        time.sleep(0.2)
    segments = sorted(part_dir.glob("*.log"))
    assert len(segments) >= 4, "rolled by size"
    assert all(p.stat().st_size <= 4096 for p in segments)
    assert segments[0].name != "00000000000000000000.log", "oldest segments deleted"
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, consumer_timeout_ms=2000)
    tp = TopicPartition("small", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning()
    msgs = list(consumer)
    start = consumer.beginning_offsets([tp])[tp]
    consumer.close()
    assert start > 0
    assert msgs[0].offset == start
    assert [m.offset for m in msgs] == list(range(start, 300))


def test_retention_by_time(broker_factory):
    b = broker_factory(
        {
            "log.segment.bytes": "2048",
            "log.retention.ms": "1000",
            "log.retention.check.interval.ms": "200",
            "log.segment.delete.delay.ms": "0",
        }
    )
    producer = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=0)
    old = int(time.time() * 1000) - 3_600_000
    for _i in range(50):
        producer.send("aged", value=b"x" * 100, partition=0, timestamp_ms=old).get(timeout=10)
    producer.close()
    tp = TopicPartition("aged", 0)
    deadline = time.monotonic() + 15
    start = 0
    while time.monotonic() < deadline:
        consumer = KafkaConsumer(bootstrap_servers=b.bootstrap)
        start = consumer.beginning_offsets([tp])[tp]
        consumer.close()
        if start == 50:
            break
        time.sleep(0.3)
    assert start == 50, "every segment of hour-old records was deleted"
