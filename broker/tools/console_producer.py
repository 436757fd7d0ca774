"""kafka-console-producer: stdin lines as records, read and sent as Kafka's tool does.

    python -m broker.tools console-producer --bootstrap-server HOST:PORT --topic T \\
        [--property parse.key=true --property key.separator=:] [--sync] \\
        [--producer-property acks=1 ...] [--producer.config FILE] < lines

Each line (without its line ending) is a value; with `parse.key=true` the text before
`key.separator` is the key, with `parse.headers=true` the text before
`headers.delimiter` is `k:v,k:v` headers (Kafka's LineMessageReader, its property names
and defaults). Producer settings: `--producer.config` file, then `--producer-property`
overrides, then the explicit options (`--request-required-acks`, `--compression-codec`,
`--timeout` = linger.ms, `--batch-size`, ...), all checked by PRODUCER_CONFIG
(broker/client/producer_config.py). Exit codes: 0 every record acknowledged, 1 a line
that cannot be read or a record that failed (the error on stderr), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import Future
from typing import BinaryIO, NamedTuple

from broker.client.producer import Producer
from broker.client.producer_config import producer_kwargs
from broker.config.definition import ConfigError, load_properties
from broker.protocol.errors import KafkaError
from broker.protocol.topic import topic_name_problem
from broker.tools.arguments import add_properties_option
from broker.tools.output import Output

PROG = "kafka-console-producer"

# LineMessageReader's properties and their defaults (Kafka's names).
READER_DEFAULTS = {
    "parse.key": "false",
    "key.separator": "\t",
    "parse.headers": "false",
    "headers.delimiter": "\t",
    "headers.separator": ",",
    "headers.key.separator": ":",
    "ignore.error": "false",
    "null.marker": None,
}


class LineError(ValueError):
    """A line the reader cannot split as its properties say (Kafka's KafkaException)."""


class Line(NamedTuple):
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None


class LineReader:
    """Kafka's LineMessageReader over bytes: `[headers<delimiter>][key<separator>]value`."""

    def __init__(self, properties: dict[str, str]) -> None:
        unknown = sorted(set(properties) - set(READER_DEFAULTS))
        if unknown:
            raise ConfigError(f"Unknown property {unknown[0]!r} (value {properties[unknown[0]]!r})")
        props = {**READER_DEFAULTS, **properties}
        self.parse_key = _flag(props, "parse.key")
        self.parse_headers = _flag(props, "parse.headers")
        self.ignore_error = _flag(props, "ignore.error")
        self.key_separator = props["key.separator"].encode()
        self.headers_delimiter = props["headers.delimiter"].encode()
        self.headers_separator = props["headers.separator"].encode()
        self.headers_key_separator = props["headers.key.separator"].encode()
        marker = props["null.marker"]
        self.null_marker = marker.encode() if marker is not None else None
        for name in ("key.separator", "headers.delimiter", "headers.separator"):
            if not props[name]:
                raise ConfigError(f"Invalid value '' for property {name}: must not be empty")
        # Kafka's own checks: separators that would make a line ambiguous.
        if self.headers_delimiter == self.headers_separator:
            raise ConfigError("headers.delimiter and headers.separator may not be equal")
        if self.headers_separator == self.headers_key_separator:
            raise ConfigError("headers.separator and headers.key.separator may not be equal")
        self.line_number = 0

    def read(self, raw: bytes) -> Line:
        self.line_number += 1
        line = raw[:-1] if raw.endswith(b"\n") else raw
        line = line[:-1] if line.endswith(b"\r") else line
        headers = self._part(
            self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter"
        )
        start = 0 if headers is None else len(headers) + len(self.headers_delimiter)
        key = self._part(self.parse_key, line, start, self.key_separator, "key separator")
        start += 0 if key is None else len(key) + len(self.key_separator)
        value = line[start:]
        return Line(
            None if key == self.null_marker else key,
            None if value == self.null_marker else value,
            None if headers is None or headers == self.null_marker else self._headers(headers),
        )

    def _part(self, enabled: bool, line: bytes, start: int, mark: bytes, name: str):
        if not enabled:
            return None
        end = line.find(mark, start)
        if end >= 0:
            return line[start:end]
        if self.ignore_error:
            return None
        raise LineError(
            f"No {name} found on line number {self.line_number}: '{line.decode(errors='replace')}'"
        )

    def _headers(self, text: bytes) -> list[tuple[str, bytes | None]]:
        headers = []
        for pair in text.split(self.headers_separator):
            key, sep, value = pair.partition(self.headers_key_separator)
            if not sep:
                if not self.ignore_error:
                    raise LineError(
                        f"No header key separator found in pair '{pair.decode(errors='replace')}' "
                        f"on line number {self.line_number}"
                    )
                headers.append((pair.decode(errors="replace"), None))
                continue
            if key == self.null_marker:
                raise LineError(
                    f"Header keys should not be equal to the null marker "
                    f"'{self.null_marker.decode()}' as they can't be null"
                )
            headers.append(
                (key.decode(errors="replace"), None if value == self.null_marker else value)
            )
        return headers


def _flag(props: dict[str, str], name: str) -> bool:
    value = props[name].strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(
            f"Invalid value {props[name]!r} for property {name}: expected true or false"
        )
    return value == "true"


def main(argv: list[str] | None = None, stdin: BinaryIO | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    problem = topic_name_problem(args.topic)
    if problem:
        parser.error(f"--topic {args.topic!r}: {problem}")
    try:
        reader = LineReader(dict(args.property))
        servers, settings = producer_kwargs(_producer_properties(args))
    except ConfigError as exc:
        parser.error(str(exc))
    out = Output()
    try:
        with Producer(servers, **settings) as producer:
            failures = _produce(producer, args, reader, stdin or sys.stdin.buffer, out)
    except (KafkaError, LineError) as exc:
        out.error(str(exc))
        return 1
    for topic, key, value, exc in failures:
        out.note(
            f"Error when sending message to topic {topic} with key: {_size(key)}, "
            f"value: {_size(value)} with error: {exc}"
        )
    return 1 if failures or out.failed else 0


def _produce(producer: Producer, args, reader: LineReader, lines: BinaryIO, out: Output) -> list:
    """Sends every line; returns (topic, key, value, error) of the records that failed.
    A line the reader refuses stops the tool (as Kafka's), after what was read before it
    has been sent."""
    pending: list[tuple[Line, Future]] = []
    failures = []
    try:
        for raw in _until_interrupted(lines):
            line = reader.read(raw)
            future = producer.send(args.topic, line.value, key=line.key, headers=line.headers)
            if args.sync:
                exc = future.exception()
                if exc is not None:
                    failures.append((args.topic, line.key, line.value, exc))
                    break
            else:
                pending.append((line, future))
    finally:
        producer.flush()
        for line, future in pending:
            exc = future.exception()
            if exc is not None:
                failures.append((args.topic, line.key, line.value, exc))
    return failures


def _until_interrupted(lines: BinaryIO):
    """The lines, until EOF or Ctrl-C (then what was read is still sent, as Kafka's tool
    closes its producer)."""
    try:
        yield from lines
    except KeyboardInterrupt:
        return


def _size(data: bytes | None) -> str:
    return "null" if data is None else f"{len(data)} bytes"


def _producer_properties(args) -> dict[str, str]:
    """The producer.config file, the --producer-property overrides, then the options."""
    props = load_properties(args.producer_config) if args.producer_config else {}
    props.update(dict(args.producer_property))
    props["bootstrap.servers"] = args.bootstrap_server
    explicit = {
        "acks": args.request_required_acks,
        "compression.type": args.compression_codec,
        "linger.ms": args.timeout,
        "batch.size": args.batch_size,
        "max.block.ms": args.max_block_ms,
        "buffer.memory": args.max_memory_bytes,
        "retries": args.message_send_max_retries,
        "request.timeout.ms": args.request_timeout_ms,
    }
    props.update({k: str(v) for k, v in explicit.items() if v is not None})
    # Kafka's console producer lingers 1000 ms (--timeout) unless told otherwise.
    props.setdefault("linger.ms", "1000")
    return props


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Read lines from standard input and send them as records."
    )
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    parser.add_argument("--topic", required=True)
    add_properties_option(
        parser,
        "--property",
        "line reader properties: parse.key, key.separator, parse.headers, headers.delimiter, "
        "headers.separator, headers.key.separator, ignore.error, null.marker",
    )
    add_properties_option(
        parser, "--producer-property", "producer settings (Kafka's names, PRODUCER_CONFIG)"
    )
    parser.add_argument("--producer.config", dest="producer_config", metavar="FILE")
    parser.add_argument("--request-required-acks", metavar="ACKS", help="all, -1, 0 or 1")
    parser.add_argument(
        "--compression-codec",
        nargs="?",
        const="gzip",
        metavar="CODEC",
        help="none, gzip (without a value), snappy, lz4 or zstd",
    )
    parser.add_argument("--sync", action="store_true", help="wait for each record's answer")
    parser.add_argument("--timeout", type=int, metavar="MS", help="linger.ms (default 1000)")
    parser.add_argument("--batch-size", type=int, metavar="BYTES")
    parser.add_argument("--max-block-ms", type=int, metavar="MS")
    parser.add_argument("--max-memory-bytes", type=int, metavar="BYTES")
    parser.add_argument("--message-send-max-retries", type=int, metavar="N")
    parser.add_argument("--request-timeout-ms", type=int, metavar="MS")
    return parser
