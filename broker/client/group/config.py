"""The group consumer's settings, declared once (the ConfigDef every component uses) with
Kafka's consumer key names, so errors name the key and value and docs/configuration.md
lists them. `GroupConsumer(**settings)` takes them in snake_case (`group_id` for
`group.id`), as kafka-python does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.client.group.assignors import make_assignors, rebalance_protocol
from broker.config.definition import ConfigDef, ConfigError, at_least, one_of
from broker.util.clock import MINUTE_MS, SECOND_MS


def _assignors_problem(names: list[str]) -> str | None:
    if not names:
        return "name at least one assignor"
    try:
        rebalance_protocol(make_assignors(names))
    except ValueError as exc:
        return str(exc)
    return None


CONSUMER_CONFIG = (
    ConfigDef("Group consumer (broker.client.group.GroupConsumer)")
    .define(
        "group.id",
        "string",
        None,
        "The consumer group. Needed by subscribe() and by commits; assign() works without.",
        optional=True,
        group="group",
    )
    .define(
        "group.instance.id",
        "string",
        None,
        "Makes the member static (KIP-345): it keeps its assignment when it comes back "
        "within session.timeout.ms, and does not leave the group when closed.",
        optional=True,
        group="group",
    )
    .define(
        "session.timeout.ms",
        "int",
        45 * SECOND_MS,
        "Without a heartbeat for this long the coordinator removes the member.",
        validator=at_least(1),
        group="group",
    )
    .define(
        "heartbeat.interval.ms",
        "int",
        3 * SECOND_MS,
        "Time between heartbeats (from a background thread); below session.timeout.ms.",
        validator=at_least(1),
        group="group",
    )
    .define(
        "max.poll.interval.ms",
        "int",
        5 * MINUTE_MS,
        "A member that does not call poll() for this long leaves the group (a static "
        "member stops heartbeating instead). Also the rebalance timeout sent in JoinGroup.",
        validator=at_least(1),
        group="group",
    )
    .define(
        "partition.assignment.strategy",
        "list",
        ["range", "cooperative-sticky"],
        "Assignors in order of preference: range, roundrobin, sticky, cooperative-sticky. "
        "The rebalance protocol is cooperative only when every one listed supports it.",
        validator=_assignors_problem,
        group="group",
    )
    .define(
        "enable.auto.commit",
        "boolean",
        True,
        "Commit consumed positions every auto.commit.interval.ms (from poll()), before a "
        "rebalance revokes partitions, and on close.",
        group="offsets",
    )
    .define(
        "auto.commit.interval.ms",
        "int",
        5 * SECOND_MS,
        "Time between automatic commits.",
        validator=at_least(0),
        group="offsets",
    )
    .define(
        "auto.offset.reset",
        "string",
        "latest",
        "Where a partition without a committed offset (or with one out of range) starts: "
        "earliest, latest, or none (raise).",
        validator=one_of("earliest", "latest", "none"),
        group="offsets",
    )
    .define(
        "isolation.level",
        "string",
        "read_uncommitted",
        "read_committed: read only committed transactional records, up to the last "
        "stable offset, and start from settled committed offsets (OffsetFetch "
        "require_stable); read_uncommitted: every record, as Kafka's consumer by default.",
        validator=one_of("read_uncommitted", "read_committed"),
        group="fetching",
    )
    .define(
        "client.id",
        "string",
        "kafka-hourly",
        "Sent with every request.",
        group="fetching",
    )
    .define(
        "client.rack",
        "string",
        None,
        "The rack of this member, sent in its subscription (v3).",
        optional=True,
        group="fetching",
    )
    .define(
        "fetch.min.bytes",
        "int",
        1,
        "A fetch waits for this many bytes (or fetch.max.wait.ms).",
        validator=at_least(0),
        group="fetching",
    )
    .define(
        "fetch.max.wait.ms",
        "int",
        500,
        "Longest a fetch waits at the broker for fetch.min.bytes.",
        validator=at_least(0),
        group="fetching",
    )
    .define(
        "fetch.max.bytes",
        "int",
        50 * 1024 * 1024,
        "Most record bytes one fetch asks of a broker over all its partitions (the first "
        "batch of the first partition with data comes whole even when larger).",
        validator=at_least(0),
        group="fetching",
    )
    .define(
        "max.partition.fetch.bytes",
        "int",
        1024 * 1024,
        "Most record bytes a fetch asks of one partition (its first batch comes whole even "
        "when larger if it is the first data of the answer).",
        validator=at_least(1),
        group="fetching",
    )
    .define(
        "max.poll.records",
        "int",
        500,
        "Most records one poll() returns; the rest wait for the next.",
        validator=at_least(1),
        group="fetching",
    )
    .define(
        "request.timeout.ms",
        "int",
        30 * SECOND_MS,
        "How long a request may wait for its answer (JoinGroup: the rebalance timeout more).",
        validator=at_least(1),
        group="fetching",
    )
    .define(
        "metadata.max.age.ms",
        "int",
        5 * MINUTE_MS,
        "Metadata is refreshed this often: a pattern subscription picks up new topics, "
        "and a changed partition count triggers a rebalance.",
        validator=at_least(0),
        group="fetching",
    )
    .define(
        "retry.backoff.ms",
        "int",
        100,
        "Wait before retrying a failed request to the coordinator.",
        validator=at_least(0),
        group="fetching",
    )
    .define(
        "exclude.internal.topics",
        "boolean",
        True,
        "A pattern subscription leaves out internal topics (__consumer_offsets).",
        group="fetching",
    )
)

_TYPES = {"int": int, "boolean": bool, "string": str, "list": list}


def consumer_config(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Validated settings (dotted names, defaults filled in) from snake_case keyword
    arguments; ConfigError names the key and the value that is wrong."""
    raw: dict[str, Any] = {}
    for name, value in settings.items():
        key = name.replace("_", ".")
        definition = CONSUMER_CONFIG.keys.get(key)
        if definition is None:
            raise ConfigError(f"Unknown configuration {name!r} (value {value!r})")
        wanted = _TYPES[definition.type]
        if value is not None and not isinstance(value, str):
            # A typed value must be of the key's type (True is not an int here).
            if not isinstance(value, wanted) or (wanted is int and isinstance(value, bool)):
                raise ConfigError(
                    f"Invalid value {value!r} for configuration {key}: expected a {definition.type}"
                )
        raw[key] = value
    values = CONSUMER_CONFIG.parse({k: v for k, v in raw.items() if v is not None})
    if values["heartbeat.interval.ms"] >= values["session.timeout.ms"]:
        raise ConfigError(
            f"Invalid value {values['heartbeat.interval.ms']!r} for configuration "
            f"heartbeat.interval.ms: must be below session.timeout.ms "
            f"({values['session.timeout.ms']})"
        )
    return values
