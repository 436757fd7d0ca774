"""Crash recovery and clean restarts, through the running broker."""

from __future__ import annotations

import os
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from broker.records.header import read_offset_and_length


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, linger_ms=0, max_in_flight_requests_per_connection=1
    )
    for v in values:
        producer.send(topic, value=v, partition=0).get(timeout=10)  # one batch per record
    producer.close()


def _consume(bootstrap: str, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=2000)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    values = [m.value for m in consumer]
    consumer.close()
    return values


def _active_segment(log_dir: Path, topic: str) -> Path:
    return sorted((log_dir / f"{topic}-0").glob("*.log"))[-1]


def _batch_starts(segment: Path) -> list[int]:
    data = segment.read_bytes()
    pos, starts = 0, []
    while pos + 12 <= len(data):
        _, length = read_offset_and_length(data, pos)
        starts.append(pos)
        pos += 12 + length
    return starts


def test_clean_restart_keeps_everything(broker_factory, tmp_path):
    b = broker_factory()
    _produce(b.bootstrap, "restart", [f"v{i}".encode() for i in range(50)])
    assert b.stop() == 0
    assert "stopped cleanly" in b.log_text()
    b.start()
    _produce(b.bootstrap, "restart", [f"v{i}".encode() for i in range(50, 60)])
    assert _consume(b.bootstrap, "restart") == [f"v{i}".encode() for i in range(60)]


def test_garbage_tail_is_truncated_on_restart(broker_factory):
    b = broker_factory()
    _produce(b.bootstrap, "torn", [f"v{i}".encode() for i in range(20)])
    b.kill()  # no clean shutdown: recovery must look at the tail
    segment = _active_segment(b.log_dir, "torn")
    with open(segment, "ab") as f:
        f.write(os.urandom(5000))
    b.start()
    assert _consume(b.bootstrap, "torn") == [f"v{i}".encode() for i in range(20)]
    _produce(b.bootstrap, "torn", [b"after"])
    assert _consume(b.bootstrap, "torn")[-1] == b"after"
    assert len(_consume(b.bootstrap, "torn")) == 21


def test_batch_cut_in_the_middle_is_dropped_on_restart(broker_factory):
    b = broker_factory()
    _produce(b.bootstrap, "cut", [f"v{i}".encode() * 10 for i in range(10)])
    b.kill()
    segment = _active_segment(b.log_dir, "cut")
    starts = _batch_starts(segment)
    last = starts[-1]
    size = segment.stat().st_size
    os.truncate(segment, last + (size - last) // 2)
    b.start()
    # Everything up to the last valid batch, nothing after it; new data continues after it.
    assert _consume(b.bootstrap, "cut") == [f"v{i}".encode() * 10 for i in range(9)]
    _produce(b.bootstrap, "cut", [b"next"])
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, consumer_timeout_ms=2000)
    consumer.assign([TopicPartition("cut", 0)])
    consumer.seek_to_beginning()
    offsets = [(m.offset, m.value) for m in consumer]
    consumer.close()
    assert offsets[-1] == (9, b"next")
