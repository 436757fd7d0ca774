"""Throughput of our Confluent-framed Avro serializer/deserializer against plain
fastavro schemaless_writer/reader on the same records, in the same run.

    .venv/bin/python -m bench.bench_serde [--records 20000] [--rounds 7]

Our serde does what plain fastavro does plus the 5-byte frame, a cached schema-id
lookup per call and, for deserialization, the id parse and writer-schema cache;
the registry is contacted once per subject/id (a real one, on loopback).
"""

from __future__ import annotations

import argparse
import io
import socket
import threading
import time

import fastavro
import uvicorn

from bench.common import events  # the same page views as the decode benchmark
from schemas import catalog
from schemas.client import RegistryClient
from schemas.registry.app import create_app
from schemas.registry.service import Registry
from schemas.serde import AvroDeserializer, AvroSerializer, parse_schema, unframe
from schemas.store import InMemoryStore

TOPIC = "page-views"


def serve_registry() -> tuple[uvicorn.Server, threading.Thread, str]:
    registry = Registry(InMemoryStore())
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(create_app(registry), log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    return server, thread, f"http://127.0.0.1:{sock.getsockname()[1]}"


def best_rates(plain, ours, count: int, rounds: int) -> tuple[float, float]:
    """Records per second of the fastest round of each. Rounds alternate between the
    two so that a busy machine slows both alike."""
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        for i, work in enumerate((plain, ours)):
            start = time.perf_counter()
            work()
            best[i] = min(best[i], time.perf_counter() - start)
    return count / best[0], count / best[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    data = events(args.records)
    v2_text = catalog.load_str("PageViewEvent.v2")
    v2 = parse_schema(v2_text)
    v3 = parse_schema(catalog.load_str("PageViewEvent.v3"))

    server, thread, url = serve_registry()
    try:
        client = RegistryClient(url)
        serialize = AvroSerializer(client, v2_text)
        deserialize = AvroDeserializer(client)
        framed = [serialize(r, TOPIC) for r in data]
        bodies = [bytes(unframe(f)[1]) for f in framed]
        client.register(f"{TOPIC}-value", catalog.load_str("PageViewEvent.v3"))
        project = AvroDeserializer(client, use_latest=True)
        project(framed[0], TOPIC)

        def plain_write():
            for r in data:
                out = io.BytesIO()
                fastavro.schemaless_writer(out, v2, r)
                out.getvalue()

        def plain_read():
            for b in bodies:
                fastavro.schemaless_reader(io.BytesIO(b), v2, None)

        def plain_project():
            for b in bodies:
                fastavro.schemaless_reader(io.BytesIO(b), v2, v3)

        n, rounds = len(data), args.rounds
        rows = [
            (
                "serialize",
                *best_rates(plain_write, lambda: [serialize(r, TOPIC) for r in data], n, rounds),
            ),
            (
                "deserialize",
                *best_rates(plain_read, lambda: [deserialize(f, TOPIC) for f in framed], n, rounds),
            ),
            (
                "deserialize v2 -> v3",
                *best_rates(plain_project, lambda: [project(f, TOPIC) for f in framed], n, rounds),
            ),
        ]
        client.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)

    size = sum(len(f) for f in framed) / len(framed)
    print(
        f"{len(data)} PageViewEvent.v2 records, {size:.0f} bytes framed on average, best of {args.rounds}"
    )
    print(f"{'operation':<22}{'fastavro rec/s':>16}{'ours rec/s':>14}{'ours/fastavro':>15}")
    for name, plain, ours in rows:
        print(f"{name:<22}{plain:>16,.0f}{ours:>14,.0f}{ours / plain:>15.2f}")


if __name__ == "__main__":
    main()
