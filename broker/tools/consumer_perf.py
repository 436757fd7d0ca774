"""kafka-consumer-perf-test: consume N records and report the rate as Kafka's
ConsumerPerformance does.

    python -m broker.tools consumer-perf-test --bootstrap-server HOST:PORT --topic T \\
        --messages N [--group G] [--from-latest] [--timeout MS] [--hide-header]

Prints Kafka's header and one line:

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    2024-05-01 13:00:00:000, 2024-05-01 13:00:02:500, 9.5367, 3.8147, 10000, 4000.0000, 0, 2500, 3.8147, 4000.0000

Data is the bytes of keys and values. Without --group every partition is read from its
start (from its end with --from-latest) outside any group, so rebalance.time.ms is 0;
with --group the tool is a member of the group, and rebalance.time.ms is the time until
it had its partitions. It stops after --messages records or --timeout ms without one
(Kafka's warning then). Exit codes: 0 done, 1 a broker error, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime

from broker.client.group.config import consumer_config
from broker.config.definition import ConfigError
from broker.protocol.errors import KafkaError
from broker.protocol.topic import topic_name_problem
from broker.tools.consuming import (
    EARLIEST,
    LATEST,
    GroupReader,
    PartitionReader,
    consumer_properties,
)
from broker.tools.output import Output
from broker.util.clock import SECOND_MS, now_ms

PROG = "kafka-consumer-perf-test"
HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
MB = 1024 * 1024


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    problem = topic_name_problem(args.topic)
    if problem:
        parser.error(f"--topic {args.topic!r}: {problem}")
    if args.messages < 1:
        parser.error("--messages must be at least 1")
    if args.timeout < 0:
        parser.error("--timeout must not be negative")
    try:
        args.security, args.settings = consumer_properties(args.consumer_config)
        if args.settings and args.group is None:
            parser.error(
                "--consumer.config: consumer settings need --group: "
                + ", ".join(sorted(args.settings))
            )
        if args.settings:
            consumer_config(args.settings)
    except ConfigError as exc:
        parser.error(str(exc))
    out = Output()
    start_ms = now_ms()
    count = size = 0
    join_ms = 0
    try:
        reader, join_ms = _reader(args)
        try:
            count, size = _consume(reader, args, out)
        finally:
            reader.close()
    except KafkaError as exc:
        out.error(str(exc))
        return 1
    end_ms = now_ms()
    elapsed_s = max(end_ms - start_ms, 1) / SECOND_MS
    fetch_ms = max(end_ms - start_ms - join_ms, 1)
    megabytes = size / MB
    if not args.hide_header:
        out.line(HEADER)
    out.line(
        f"{_date(start_ms)}, {_date(end_ms)}, {megabytes:.4f}, {megabytes / elapsed_s:.4f}, "
        f"{count}, {count / elapsed_s:.4f}, {join_ms}, {fetch_ms}, "
        f"{megabytes / (fetch_ms / SECOND_MS):.4f}, {count / (fetch_ms / SECOND_MS):.4f}"
    )
    return 0


def _reader(args):
    """The reader, and how long it took to get its partitions (a group's rebalance)."""
    reset = LATEST if args.from_latest else EARLIEST
    if args.group is None:
        reader = PartitionReader(
            args.bootstrap_server, topics=[args.topic], start=reset, security=args.security
        )
        return reader, 0
    began = now_ms()
    reader = GroupReader(
        args.bootstrap_server,
        args.group,
        topics=[args.topic],
        reset=reset,
        settings=args.settings,
        security=args.security,
    )
    reader.wait_for_assignment(args.timeout / SECOND_MS)
    return reader, now_ms() - began


def _consume(reader, args, out: Output) -> tuple[int, int]:
    """(records, bytes of their keys and values) until --messages or --timeout."""
    count = size = 0
    last = time.monotonic()
    timeout_s = args.timeout / SECOND_MS
    while count < args.messages:
        records = reader.poll(min(1.0, timeout_s))
        if not records:
            if time.monotonic() - last >= timeout_s:
                out.line(
                    f"WARNING: Exiting before consuming the expected number of messages: "
                    f"timeout ({args.timeout} ms) exceeded. You can use the --timeout option "
                    "to increase the timeout."
                )
                break
            continue
        last = time.monotonic()
        for topic, partition, record in records[: args.messages - count]:
            count += 1
            size += len(record.key or b"") + len(record.value or b"")
            reader.done(topic, partition, record.offset)
    return count, size


def _date(ms: int) -> str:
    """Kafka's default --date-format, yyyy-MM-dd HH:mm:ss:SSS, in local time."""
    moment = datetime.fromtimestamp(ms / SECOND_MS)
    return moment.strftime("%Y-%m-%d %H:%M:%S:") + f"{ms % SECOND_MS:03d}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Measure the consumer's throughput.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--messages", type=int, required=True, metavar="N")
    parser.add_argument("--group", metavar="GROUP", help="consume as a member of this group")
    parser.add_argument("--from-latest", action="store_true", help="start at the log end")
    parser.add_argument(
        "--timeout",
        type=int,
        default=10 * SECOND_MS,
        metavar="MS",
        help="the longest time between records before giving up (default 10000)",
    )
    parser.add_argument("--hide-header", action="store_true")
    parser.add_argument(
        "--consumer.config",
        dest="consumer_config",
        metavar="FILE",
        help="consumer properties: security.protocol, sasl.*, ssl.* (and, with --group, the "
        "group consumer's settings)",
    )
    return parser
