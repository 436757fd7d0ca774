"""Raw fetch throughput of our client (SimpleConsumer.fetch, bytes only, no decoding) vs a
plain loopback socket copy of the same segment bytes, in the same run.

    .venv/bin/python -m bench.bench_fetch [--megabytes 512]
"""

from __future__ import annotations

import argparse
import socket
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

from bench.common import report, running_broker
from broker.client.simple_consumer import SimpleConsumer

TOPIC = "fetch-bench"


def fill(bootstrap: str, megabytes: int) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "batch.num.messages": 100_000,
            "acks": 1,
        }
    )
    payload = b"y" * 1000
    for _ in range(megabytes * 1000):
        while True:
            try:
                producer.produce(TOPIC, payload, partition=0)
                break
            except BufferError:
                producer.poll(0.001)
    assert producer.flush(120) == 0


def our_fetch(bootstrap: str, max_bytes: int) -> tuple[float, int]:
    consumer = SimpleConsumer(bootstrap)
    end = consumer.latest_offset(TOPIC, 0)
    offset, total = 0, 0
    start = time.perf_counter()
    while offset < end:
        result = consumer.fetch(TOPIC, 0, offset, max_bytes=max_bytes)
        total += len(result.records_bytes)
        offset = result.next_offset
    elapsed = time.perf_counter() - start
    consumer.close()
    return total / elapsed, total


def loopback_copy(segments: list[Path], chunk: int) -> float:
    """A server thread sendfile()s the segment files; the client recv_into()s them."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    total = sum(p.stat().st_size for p in segments)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            for path in segments:
                with open(path, "rb") as f:
                    conn.sendfile(f)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    buf = bytearray(chunk)
    view = memoryview(buf)
    received = 0
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as s:
        while received < total:
            n = s.recv_into(view)
            if not n:
                break
            received += n
    elapsed = time.perf_counter() - start
    server.join()
    listener.close()
    return received / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=int, default=512)
    parser.add_argument("--fetch-bytes", type=int, default=8 * 1024 * 1024)
    args = parser.parse_args()
    with running_broker(**{"num.partitions": "1", "message.max.bytes": "2000000"}) as (
        bootstrap,
        log_dir,
    ):
        fill(bootstrap, args.megabytes)
        ours, total = our_fetch(bootstrap, args.fetch_bytes)
        segments = sorted((log_dir / f"{TOPIC}-0").glob("*.log"))
        baseline = loopback_copy(segments, args.fetch_bytes)
    report(
        f"raw fetch of {total / 1e6:,.0f} MB",
        ours / 1e6,
        baseline / 1e6,
        "MB/s",
        "loopback socket copy",
    )


if __name__ == "__main__":
    main()
