"""confluent-kafka producing and consuming N 100-byte messages: our broker vs librdkafka's
in-process mock cluster (test.mock.num.brokers), in the same run.

    .venv/bin/python -m bench.bench_clients [--messages 2000000]
"""

from __future__ import annotations

import argparse
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.common import report, running_broker

PAYLOAD = b"x" * 100
TOPIC = "bench"


def produce(conf: dict, n: int, topic: str = TOPIC) -> tuple[float, str, Producer]:
    """n messages of PAYLOAD to partition 0 of `topic`, acks=1 and linger 5 ms unless `conf`
    says otherwise; the rate, the address of a broker (the mock cluster's) and the producer,
    returned so a mock cluster (owned by it) outlives the consume phase."""
    producer = Producer(
        {
            "linger.ms": 5,
            "acks": 1,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 1_000_000,
            "enable.idempotence": False,
            **conf,
        }
    )
    md = producer.list_topics(timeout=10)
    broker = next(iter(md.brokers.values()))
    bootstrap = f"{broker.host}:{broker.port}"
    start = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                producer.produce(topic, PAYLOAD, partition=0)
                break
            except BufferError:
                producer.poll(0.001)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    assert remaining == 0
    return n / elapsed, bootstrap, producer


def consume(
    bootstrap: str, n: int, topic: str = TOPIC, conf: dict | None = None
) -> tuple[float, int]:
    """Read the partition from its log start to its high watermark, again and again until
    n messages have been delivered. The mock cluster keeps only a bounded tail of each
    partition (about 5 MB), so it is read in several passes; ours in one. Each consume()
    asks for exactly what is left before the high watermark: it blocks until it has as
    many messages as asked for, so asking for more would time the timeout."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760,
            **(conf or {}),
        }
    )
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.assign([TopicPartition(topic, 0, low)])
    got, passes = 0, 0
    start = time.perf_counter()
    while got < n:
        if passes:
            consumer.seek(TopicPartition(topic, 0, low))
        passes += 1
        position = low
        while position < high and got < n:
            for msg in consumer.consume(min(10000, high - position, n - got), timeout=10):
                if msg.error():
                    raise RuntimeError(msg.error())
                got += 1
                position = msg.offset() + 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return got / elapsed, passes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=2_000_000)
    n = parser.parse_args().messages

    mock_rate, mock_bootstrap, mock_owner = produce({"test.mock.num.brokers": 1}, n)
    mock_consume, mock_passes = consume(mock_bootstrap, n)
    del mock_owner
    with running_broker(**{"num.partitions": "1"}) as (bootstrap, _):
        our_rate, _, producer = produce({"bootstrap.servers": bootstrap}, n)
        our_consume, our_passes = consume(bootstrap, n)
        del producer
    report(
        f"produce {n:,} x 100 B (acks=1, linger 5 ms)", our_rate, mock_rate, "msg/s", "mock cluster"
    )
    print(f"consume passes over the retained log: ours {our_passes}, mock cluster {mock_passes}")
    report(f"consume {n:,} x 100 B", our_consume, mock_consume, "msg/s", "mock cluster")


if __name__ == "__main__":
    main()
