"""kafka-producer-perf-test: send N records as fast as allowed and report throughput and
latency as Kafka's ProducerPerformance does.

    python -m broker.tools producer-perf-test --topic T --num-records N \\
        (--record-size BYTES | --payload-file F [--payload-delimiter D]) \\
        --throughput RECORDS_PER_SEC (-1: unlimited) \\
        (--producer-props bootstrap.servers=HOST:PORT k=v ... | --producer.config F)

Every 5 seconds a line for the window (`N records sent, X records/sec (Y MB/sec), A ms
avg latency, M ms max latency.`), at the end the totals with the 50th, 95th, 99th and
99.9th percentile latencies. A record's latency runs from send() until its future
resolved (the broker's acknowledgement). Exit codes: 0 every record acknowledged, 1 some
failed (the first errors on stderr), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from pathlib import Path

from broker.client.producer import Producer
from broker.client.producer_config import producer_kwargs
from broker.config.definition import ConfigError, load_properties
from broker.protocol.errors import KafkaError
from broker.protocol.topic import topic_name_problem
from broker.tools.arguments import key_value
from broker.tools.output import Output
from broker.util.clock import SECOND_MS

PROG = "kafka-producer-perf-test"
REPORTING_INTERVAL_MS = 5 * SECOND_MS
MB = 1024 * 1024
_SHOWN_ERRORS = 5


class Stats:
    """Latencies and bytes of acknowledged records, fed from the producer's sender thread;
    prints a window line every REPORTING_INTERVAL_MS, as Kafka's Stats does."""

    def __init__(self, out: Output) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.start = time.monotonic()
        self.latencies: list[int] = []
        self.bytes = 0
        self.errors: list[BaseException] = []
        self._window_start = self.start
        self._window = [0, 0, 0, 0]  # count, bytes, total latency, max latency

    def record(self, latency_ms: int, size: int) -> None:
        with self.lock:
            self.latencies.append(latency_ms)
            self.bytes += size
            window = self._window
            window[0] += 1
            window[1] += size
            window[2] += latency_ms
            window[3] = max(window[3], latency_ms)
            now = time.monotonic()
            if (now - self._window_start) * SECOND_MS >= REPORTING_INTERVAL_MS:
                self._print_window(now)

    def _print_window(self, now: float) -> None:
        count, size, total, worst = self._window
        elapsed = max(now - self._window_start, 1e-9)
        self.out.line(
            f"{count} records sent, {count / elapsed:.1f} records/sec "
            f"({size / MB / elapsed:.2f} MB/sec), {total / max(count, 1):.1f} ms avg latency, "
            f"{float(worst):.1f} ms max latency."
        )
        self._window_start = now
        self._window = [0, 0, 0, 0]

    def failed(self, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(exc)

    def summary(self) -> str:
        with self.lock:
            count = len(self.latencies)
            elapsed = max(time.monotonic() - self.start, 1e-9)
            ordered = sorted(self.latencies)
            avg = sum(ordered) / count if count else 0.0
            worst = ordered[-1] if ordered else 0
            p50, p95, p99, p999 = (_percentile(ordered, q) for q in (0.5, 0.95, 0.99, 0.999))
            return (
                f"{count} records sent, {count / elapsed:f} records/sec "
                f"({self.bytes / MB / elapsed:.2f} MB/sec), {avg:.2f} ms avg latency, "
                f"{float(worst):.2f} ms max latency, {p50} ms 50th, {p95} ms 95th, "
                f"{p99} ms 99th, {p999} ms 99.9th."
            )


def _percentile(ordered: list[int], q: float) -> int:
    """Kafka's: the value at index floor(q * n) of the sorted latencies."""
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] if ordered else 0


class Throttler:
    """Kafka's ThroughputThrottler: sleep when ahead of `per_second` records; -1 never."""

    def __init__(self, per_second: float) -> None:
        self.per_second = per_second
        self.start = time.monotonic()

    def pace(self, sent: int) -> None:
        if self.per_second <= 0:
            return
        ahead = sent / self.per_second - (time.monotonic() - self.start)
        if ahead > 0:
            time.sleep(ahead)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    out = Output()
    problem = _usage_problem(args)
    if problem:
        parser.error(problem)
    try:
        props = load_properties(args.producer_config) if args.producer_config else {}
        props.update(dict(args.producer_props or []))
        if args.bootstrap_server:
            props["bootstrap.servers"] = args.bootstrap_server
        servers, settings = producer_kwargs(props)
        payloads = _payloads(args, out)
    except (ConfigError, OSError) as exc:
        parser.error(str(exc))
    stats = Stats(out)
    throttler = Throttler(args.throughput)
    try:
        with Producer(servers, **settings) as producer:
            stats.start = throttler.start = time.monotonic()
            for i in range(args.num_records):
                payload = (
                    payloads[random.randrange(len(payloads))] if len(payloads) > 1 else payloads[0]
                )
                _send(producer, args.topic, payload, stats)
                throttler.pace(i + 1)
            producer.flush()
    except KafkaError as exc:
        out.error(str(exc))
    out.line(stats.summary())
    for exc in stats.errors[:_SHOWN_ERRORS]:
        out.error(f"a record failed: {exc!r}")
    if len(stats.errors) > _SHOWN_ERRORS:
        out.error(f"{len(stats.errors)} records failed in all")
    return 1 if out.failed else 0


def _send(producer: Producer, topic: str, payload: bytes, stats: Stats) -> None:
    sent = time.monotonic()

    def acknowledged(future) -> None:
        exc = future.exception()
        if exc is not None:
            stats.failed(exc)
        else:
            stats.record(int((time.monotonic() - sent) * SECOND_MS), len(payload))

    producer.send(topic, payload).add_done_callback(acknowledged)


def _payloads(args, out: Output) -> list[bytes]:
    """One random payload of --record-size uppercase letters (Kafka's), or the payloads
    of --payload-file split at --payload-delimiter."""
    if args.record_size is not None:
        return [bytes(random.randrange(65, 91) for _ in range(args.record_size))]
    out.line(f"Reading payloads from: {Path(args.payload_file).resolve()}")
    text = Path(args.payload_file).read_bytes()
    delimiter = args.payload_delimiter.encode().decode("unicode_escape").encode()
    payloads = [p for p in text.split(delimiter) if p]
    if not payloads:
        raise ConfigError(f"File {args.payload_file} does not contain any payloads")
    out.line(f"Number of messages read: {len(payloads)}")
    return payloads


def _usage_problem(args) -> str | None:
    problem = topic_name_problem(args.topic)
    if problem:
        return f"--topic {args.topic!r}: {problem}"
    if (args.record_size is None) == (args.payload_file is None):
        return "Either --record-size or --payload-file must be specified but not both."
    if args.record_size is not None and args.record_size < 0:
        return "--record-size must not be negative"
    if args.num_records < 1:
        return "--num-records must be at least 1"
    if args.throughput == 0:
        return "--throughput must be positive, or -1 for no limit"
    if args.producer_props is None and args.producer_config is None:
        return "Either --producer-props or --producer.config must be specified."
    return None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Measure the producer's throughput and latency."
    )
    parser.add_argument("--topic", required=True)
    parser.add_argument("--num-records", type=int, required=True, metavar="N")
    parser.add_argument("--record-size", type=int, metavar="BYTES")
    parser.add_argument("--payload-file", metavar="FILE")
    parser.add_argument(
        "--payload-delimiter", default="\\n", metavar="D", help="between payloads of the file"
    )
    parser.add_argument(
        "--throughput",
        type=float,
        required=True,
        metavar="RECORDS_PER_SEC",
        help="at most this many records a second; -1: no limit",
    )
    parser.add_argument("--producer-props", type=key_value, nargs="+", metavar="KEY=VALUE")
    parser.add_argument("--producer.config", dest="producer_config", metavar="FILE")
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]")
    return parser
