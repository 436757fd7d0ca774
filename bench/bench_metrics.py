"""Produce throughput of a broker counting Prometheus metrics (and scraped every second)
vs the same broker without `metrics.port`, in the same run (target: at most 3 % lower).

Two brokers run side by side; rounds alternate between them so machine noise hits both.
Each round: confluent-kafka sends N 100-byte messages to partition 0 (acks=1), with a
small linger so requests are many and small (the per-request cost is what metrics add:
one request's latency phases, one topic's byte and message counters).

    .venv/bin/python -m bench.bench_metrics [--messages 300000] [--rounds 4]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import urllib.request
from pathlib import Path

from bench.bench_clients import produce
from bench.common import report
from broker.processes import BrokerProcess, free_port


def scraping(url: str, stop: threading.Event) -> threading.Thread:
    """Scrape `url` every second until `stop` (Prometheus does every 15 s or more)."""

    def run() -> None:
        while not stop.wait(1.0):
            with urllib.request.urlopen(url, timeout=10) as answer:
                answer.read()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--linger-ms", type=int, default=1)
    args = parser.parse_args()
    conf = {"linger.ms": args.linger_ms, "batch.num.messages": 1000}
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as work:
        work = Path(work)
        off = BrokerProcess(work / "off", {"num.partitions": "1"}, log_path=work / "off.log")
        on = BrokerProcess(
            work / "on",
            {"num.partitions": "1", "metrics.port": str(port)},
            log_path=work / "on.log",
        )
        rates: dict[str, list[float]] = {"off": [], "on": []}
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
                    rate, _, producer = produce(
                        {"bootstrap.servers": broker.bootstrap, **conf},
                        args.messages,
                        topic=f"metrics-bench-{round_}",
                    )
                    del producer
                    rates[name].append(rate)
                    print(f"round {round_} metrics {name}: {rate:,.0f} msg/s", flush=True)
            stop.set()
            scraper.join()
    report(
        f"produce {args.messages:,} x 100 B, linger {args.linger_ms} ms, median of "
        f"{args.rounds} (metrics on vs off)",
        statistics.median(rates["on"]),
        statistics.median(rates["off"]),
        "msg/s",
        "metrics off",
    )


if __name__ == "__main__":
    main()
