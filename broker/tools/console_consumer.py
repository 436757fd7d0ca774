"""kafka-console-consumer: records printed one a line, as Kafka's tool prints them.

    python -m broker.tools console-consumer --bootstrap-server HOST:PORT \\
        (--topic T | --include REGEX) [--from-beginning] [--partition P [--offset O]] \\
        [--group G] [--max-messages N] [--timeout-ms MS] [--skip-message-on-error] \\
        [--property print.key=true ...] [--key-deserializer C] [--value-deserializer C] \\
        [--consumer.config FILE] [--consumer-property k=v ...]

Without --group the partitions are read outside any group (nothing is committed);
with --group the tool is a member of the group and commits the offsets of the records
it printed. It stops after --max-messages, after --timeout-ms without a record, or on
SIGINT/SIGTERM, and then prints `Processed a total of N messages` on stderr. The
`--consumer.config` file and `--consumer-property` hold the security settings
(`security.protocol`, `sasl.*`, `ssl.*`: broker/client/security.py) and, with --group,
the group consumer's. Exit
codes: 0 done, 1 an error (a broker error, or a record a deserializer refused without
--skip-message-on-error), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import time
from typing import BinaryIO

from broker.client.group.config import consumer_config
from broker.config.definition import ConfigError
from broker.protocol.errors import KafkaError
from broker.protocol.topic import topic_name_problem
from broker.tools.arguments import add_properties_option
from broker.tools.consuming import (
    EARLIEST,
    LATEST,
    GroupReader,
    PartitionReader,
    consumer_properties,
)
from broker.tools.output import Output
from broker.tools.record_format import RecordFormatter

PROG = "kafka-console-consumer"


class _Stop(Exception):
    """SIGTERM: end as Ctrl-C does, with the count printed."""


def main(argv: list[str] | None = None, stdout: BinaryIO | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    problem = _usage_problem(args)
    if problem:
        parser.error(problem)
    properties = dict(args.property)
    for option, key in (
        ("key_deserializer", "key.deserializer"),
        ("value_deserializer", "value.deserializer"),
    ):
        if getattr(args, option):
            properties[key] = getattr(args, option)
    try:
        formatter = RecordFormatter(properties)
        args.security, args.settings = consumer_properties(
            args.consumer_config, args.consumer_property
        )
        if args.settings and args.group is None:
            parser.error(
                "--consumer-property needs --group (without one no consumer of a group "
                f"runs): {', '.join(sorted(args.settings))}"
            )
        if args.settings:
            consumer_config(args.settings)  # refused here, named, exit 2
    except ConfigError as exc:
        parser.error(str(exc))
    out = Output()
    progress = {"count": 0}  # kept by _consume, read here whatever ended it
    previous = signal.signal(signal.SIGTERM, _raise_stop)
    try:
        reader = _reader(args)
        try:
            _consume(reader, formatter, args, stdout or sys.stdout.buffer, out, progress)
        finally:
            reader.close()
    except (KeyboardInterrupt, _Stop, BrokenPipeError):
        pass  # Ctrl-C, SIGTERM, or a reader of stdout that went away (`| head`): done
    except KafkaError as exc:
        out.error(str(exc))
    finally:
        signal.signal(signal.SIGTERM, previous)
        out.note(f"Processed a total of {progress['count']} messages")
    return 1 if out.failed else 0


def _raise_stop(signum, frame) -> None:
    raise _Stop


def _reader(args):
    start = EARLIEST if args.from_beginning else LATEST
    if args.offset is not None:
        start = args.offset
    if args.group is not None:
        return _group_reader(args, start)
    return PartitionReader(
        args.bootstrap_server,
        topics=[args.topic] if args.topic else None,
        pattern=args.include,
        partition=args.partition,
        start=start,
        security=args.security,
    )


def _group_reader(args, start: str) -> GroupReader:
    return GroupReader(
        args.bootstrap_server,
        args.group,
        topics=[args.topic] if args.topic else None,
        pattern=args.include,
        reset=start,
        settings=args.settings,
        security=args.security,
    )


def _consume(
    reader, formatter: RecordFormatter, args, stdout: BinaryIO, out: Output, progress: dict
) -> None:
    """Prints records until --max-messages, --timeout-ms or a stop, counting them in
    `progress` (a record a deserializer refused counts too, as in Kafka)."""
    count = 0
    last = time.monotonic()
    timeout_s = args.timeout_ms / 1000 if args.timeout_ms is not None else None
    while args.max_messages is None or count < args.max_messages:
        wait = (
            1.0 if timeout_s is None else max(0.0, min(1.0, timeout_s - (time.monotonic() - last)))
        )
        records = reader.poll(wait)
        if not records:
            if timeout_s is not None and time.monotonic() - last >= timeout_s:
                out.note(
                    "ERROR Error processing message, terminating consumer process: "
                    f"TimeoutException: no record within {args.timeout_ms} ms"
                )
                break
            continue
        last = time.monotonic()
        for topic, partition, record in records:
            count += 1
            progress["count"] = count
            try:
                stdout.write(formatter.format(partition, record))
            except ValueError as exc:
                where = f"{topic}-{partition} offset {record.offset}"
                if not args.skip_message_on_error:
                    out.error(
                        f"Error processing message, terminating consumer process: {exc} ({where})"
                    )
                    return
                out.note(f"ERROR Error processing message, skipping this message: {exc} ({where})")
            reader.done(topic, partition, record.offset)
            if count == args.max_messages:
                break
        stdout.flush()
    stdout.flush()


def _usage_problem(args) -> str | None:
    """Kafka's checks of the option combinations, in its words."""
    if (args.topic is None) == (args.include is None):
        return "Exactly one of --include/--topic is required."
    if args.topic is not None and topic_name_problem(args.topic):
        return f"--topic {args.topic!r}: {topic_name_problem(args.topic)}"
    if args.include is not None:
        try:
            re.compile(args.include)
        except re.error as exc:
            return f"--include {args.include!r} is not a regular expression: {exc}"
    if args.partition is not None and args.topic is None:
        return "The topic is required when partition is specified."
    if args.offset is not None and args.partition is None:
        return "The partition is required when offset is specified."
    if args.offset is not None and args.from_beginning:
        return "Options from-beginning and offset cannot be specified together."
    if args.group is not None and args.partition is not None:
        return "Options group and partition cannot be specified together."
    if args.max_messages is not None and args.max_messages < 1:
        return "--max-messages must be at least 1"
    if args.timeout_ms is not None and args.timeout_ms < 0:
        return "--timeout-ms must not be negative"
    return None


def _offset(value: str) -> str | int:
    if value in (EARLIEST, LATEST):
        return value
    try:
        offset = int(value)
    except ValueError:
        offset = -1
    if offset < 0:
        raise argparse.ArgumentTypeError(
            f"{value!r}: expected earliest, latest or an offset (a number >= 0)"
        )
    return offset


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Print records of topics.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    parser.add_argument("--topic")
    parser.add_argument("--include", "--whitelist", metavar="REGEX", help="topics to read")
    parser.add_argument("--partition", type=int, metavar="P")
    parser.add_argument("--offset", type=_offset, metavar="earliest|latest|N")
    parser.add_argument("--from-beginning", action="store_true")
    parser.add_argument("--group", metavar="GROUP", help="consume as a member of this group")
    parser.add_argument("--max-messages", type=int, metavar="N")
    parser.add_argument(
        "--timeout-ms", type=int, metavar="MS", help="exit after MS without a record"
    )
    parser.add_argument("--skip-message-on-error", action="store_true")
    add_properties_option(
        parser,
        "--property",
        "formatter properties: print.key, print.timestamp, print.partition, print.offset, "
        "print.headers, print.value, key.separator, line.separator, headers.separator, "
        "headers.key.separator, null.literal, key/value/headers.deserializer",
    )
    add_properties_option(
        parser,
        "--consumer-property",
        "security settings, and group consumer settings (with --group)",
    )
    parser.add_argument(
        "--consumer.config",
        dest="consumer_config",
        metavar="FILE",
        help="a properties file of consumer settings (security.protocol, sasl.*, ssl.*, ...)",
    )
    parser.add_argument("--key-deserializer", metavar="CLASS")
    parser.add_argument("--value-deserializer", metavar="CLASS")
    return parser
