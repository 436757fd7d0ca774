"""Produce throughput of a broker counting Prometheus metrics (and scraped every second)
vs the same broker without `metrics.port`, in the same run (target: at most 3 % lower).

Two brokers run side by side; rounds alternate between them so machine noise hits both.
Each round: confluent-kafka sends N 100-byte messages to partition 0 (acks=1), with a
small linger so requests are many and small (the per-request cost is what metrics add:
one request's latency phases, one topic's byte and message counters). The client's
Python loop shares the two cores and makes the rates noisy, so the broker's own CPU time
per message (from /proc) is reported too.

Both are too noisy on a shared machine to resolve 3 %, so the broker's own work per
produce request is also timed in process, without sockets or a client: the same frames
through `dispatch.handle_frame` plus what the network layer adds with metrics on
(`request_done`), against a broker state without metrics, alternating in many short
rounds (tests/helpers/inprocess_broker.py drives the real request handling).

    .venv/bin/python -m bench.bench_metrics [--messages 300000] [--rounds 4] [--batch-messages 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from bench.bench_clients import produce
from bench.common import report
from broker.processes import BrokerProcess, free_port
from broker.protocol.apis import PRODUCE
from tests.helpers.inprocess_broker import InProcessBroker
from tests.helpers.server_requests import create, produce_body, values

IN_PROCESS_RECORDS = 100  # records per produce request, as --batch-messages


def scraping(url: str, stop: threading.Event) -> threading.Thread:
    """Scrape `url` every second until `stop` (Prometheus does every 15 s or more)."""

    def run() -> None:
        while not stop.wait(1.0):
            with urllib.request.urlopen(url, timeout=10) as answer:
                answer.read()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def in_process_rounds(work: Path, requests: int, rounds: int) -> dict[str, list[float]]:
    """Produce requests handled per second by the broker's request path, with and without
    metrics, in alternating rounds; each round sends `requests` requests of
    IN_PROCESS_RECORDS 100-byte records (acks=1) and times what the network layer times:
    handle_frame and, with metrics, the phases and counters recorded after it."""
    brokers = {
        "off": InProcessBroker(work / "inproc-off"),
        "on": InProcessBroker(work / "inproc-on", **{"metrics.port": "0"}),
    }
    batch = values(*[b"x" * 100] * IN_PROCESS_RECORDS)
    rates: dict[str, list[float]] = {"off": [], "on": []}
    try:
        frames = {}
        for name, broker in brokers.items():
            create(broker, "inproc")
            frames[name] = broker.frame(PRODUCE, 8, produce_body("inproc", batch, acks=1))
        for round_ in range(-1, rounds):  # round -1 warms both up and is not counted
            order = ("off", "on") if round_ % 2 == 0 else ("on", "off")
            for name in order:
                broker, frame = brokers[name], frames[name]
                metrics = broker.state.metrics
                clock = time.perf_counter
                start = clock()
                for _ in range(requests):
                    received = clock()
                    broker.outcome(frame)
                    handled = clock()
                    metrics.request_done(frame, received, received, handled, handled, clock())
                if round_ >= 0:
                    rates[name].append(requests / (clock() - start))
    finally:
        for broker in brokers.values():
            broker.close()
    return rates


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--linger-ms", type=int, default=1)
    parser.add_argument("--batch-messages", type=int, default=100)
    parser.add_argument("--in-process-requests", type=int, default=500)
    parser.add_argument("--in-process-rounds", type=int, default=200)
    args = parser.parse_args()
    conf = {"linger.ms": args.linger_ms, "batch.num.messages": args.batch_messages}
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as work:
        work = Path(work)
        off = BrokerProcess(work / "off", {"num.partitions": "1"}, log_path=work / "off.log")
        on = BrokerProcess(
            work / "on",
            {"num.partitions": "1", "metrics.port": str(port)},
            log_path=work / "on.log",
        )
        inproc = in_process_rounds(work, args.in_process_requests, args.in_process_rounds)
        rates: dict[str, list[float]] = {"off": [], "on": []}
        cpu: dict[str, list[float]] = {"off": [], "on": []}  # broker µs per message
        with off, on:
            stop = threading.Event()
            scraper = scraping(f"http://127.0.0.1:{port}/metrics", stop)
            for round_ in range(args.rounds):
                for name, broker in (
                    (("off", off), ("on", on))
                    if round_ % 2 == 0
                    else (
                        ("on", on),
                        ("off", off),
                    )
                ):
                    used = cpu_seconds(broker.proc.pid)
                    rate, _, producer = produce(
                        {"bootstrap.servers": broker.bootstrap, **conf},
                        args.messages,
                        topic=f"metrics-bench-{round_}",
                    )
                    del producer
                    per_message = (cpu_seconds(broker.proc.pid) - used) / args.messages * 1e6
                    rates[name].append(rate)
                    cpu[name].append(per_message)
                    print(
                        f"round {round_} metrics {name}: {rate:,.0f} msg/s, "
                        f"broker {per_message:.3f} µs CPU/msg",
                        flush=True,
                    )
            stop.set()
            scraper.join()
    # The broker's CPU per message is reported as the rate a CPU-bound broker could reach.
    cpu_rates = {name: [1e6 / us for us in per_message] for name, per_message in cpu.items()}
    for what, medians, unit in (
        (
            f"produce {args.messages:,} x 100 B, linger {args.linger_ms} ms, batches of "
            f"{args.batch_messages}, median of {args.rounds}",
            rates,
            "msg/s",
        ),
        (
            f"broker request path in process, produce requests of {IN_PROCESS_RECORDS} "
            f"records, median of {args.in_process_rounds} rounds",
            inproc,
            "requests/s",
        ),
        ("broker CPU-bound produce rate (1 / CPU per message, median)", cpu_rates, "msg/s"),
    ):
        report(
            f"{what} (metrics on vs off)",
            statistics.median(medians["on"]),
            statistics.median(medians["off"]),
            unit,
            "metrics off",
        )


if __name__ == "__main__":
    main()
