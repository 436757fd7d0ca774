"""Argument types the Kafka-shaped tools share: `--topic TOPIC[:P,P...]` and
`--to-datetime YYYY-MM-DDTHH:mm:SS.sss` (and which options were given), parsed as Kafka's tools parse them, with
errors that name the argument (argparse prints them with the usage)."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import NamedTuple

from broker.protocol.topic import topic_name_problem
from broker.util.clock import SECOND_MS


def given_options(args: argparse.Namespace, names) -> list[str]:
    """The options among `names` (argparse dests) that were given, as `--option`s: for
    the tools' checks of which options go together."""
    return [f"--{n.replace('_', '-')}" for n in names if getattr(args, n) not in (None, False)]


class TopicSpec(NamedTuple):
    topic: str
    partitions: tuple[int, ...] | None  # None: every partition of the topic


def topic_spec(value: str) -> TopicSpec:
    """`events` or `events:0,2`: a topic, or some of its partitions."""
    topic, sep, partitions = value.partition(":")
    problem = topic_name_problem(topic)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{value!r}: {problem}")
    if not sep:
        return TopicSpec(topic, None)
    try:
        numbers = tuple(int(p) for p in partitions.split(","))
    except ValueError:
        numbers = ()
    if not numbers or min(numbers) < 0:
        raise argparse.ArgumentTypeError(
            f"{value!r}: expected TOPIC or TOPIC:PARTITION[,PARTITION...] with partition "
            "numbers >= 0"
        )
    return TopicSpec(topic, tuple(sorted(set(numbers))))


# Kafka's Utils.getDateTime: ISO-8601 with milliseconds, and an optional zone (Z, +HH:MM,
# +HHMM, +HH); without one the time is UTC. The milliseconds may be left out here.
_DATETIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?"
    r"(Z|[+-]\d{2}(?::?\d{2})?)?$"
)


def datetime_ms(value: str) -> int:
    """`2024-05-01T13:00:00.000` (UTC) or with a zone (`...Z`, `...+02:00`) -> epoch ms."""
    match = _DATETIME.match(value)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a date-time: expected YYYY-MM-DDTHH:mm:SS.sss, optionally "
            "followed by a zone (Z, +HH:MM)"
        )
    year, month, day, hour, minute, second, millis, zone = match.groups()
    try:
        moment = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=UTC
        )
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{value!r}: {exc}") from None
    if zone and zone != "Z":
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
        moment = moment.replace(tzinfo=timezone(offset if zone[0] == "+" else -offset))
    return int(moment.timestamp()) * SECOND_MS + int((millis or "0").ljust(3, "0"))


def key_value(value: str) -> tuple[str, str]:
    """`key=value`, as Kafka's tools take `--property` and `--producer-property`."""
    key, sep, rest = value.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{value!r}: expected key=value")
    return key.strip(), rest


def add_properties_option(parser: argparse.ArgumentParser, flag: str, help: str) -> None:
    """A repeatable `FLAG key=value` option (Kafka's `--property` and friends), collected
    as a list of (key, value) in order, so a later one wins when made a dict."""
    parser.add_argument(
        flag, type=key_value, action="append", default=[], metavar="KEY=VALUE", help=help
    )
