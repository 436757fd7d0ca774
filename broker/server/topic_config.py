"""Per-topic configuration overrides (CreateTopics `configs`), declared once like the
broker's keys, with Kafka's topic-level names."""

from __future__ import annotations

import dataclasses
from typing import Any

from broker.config.definition import ConfigDef, at_least, one_of
from broker.log.config import LogConfig

TOPIC_CONFIG = (
    ConfigDef("Topic overrides (CreateTopics configs)")
    .define(
        "retention.ms",
        "long",
        None,
        "Overrides log.retention.ms for this topic.",
        optional=True,
        validator=at_least(-1),
    )
    .define(
        "retention.bytes",
        "long",
        None,
        "Overrides log.retention.bytes.",
        optional=True,
        validator=at_least(-1),
    )
    .define(
        "segment.bytes",
        "int",
        None,
        "Overrides log.segment.bytes.",
        optional=True,
        validator=at_least(1024),
    )
    .define(
        "segment.ms", "long", None, "Overrides log.roll.ms.", optional=True, validator=at_least(1)
    )
    .define(
        "max.message.bytes",
        "int",
        None,
        "Overrides message.max.bytes.",
        optional=True,
        validator=at_least(0),
    )
    .define(
        "flush.messages",
        "long",
        None,
        "Overrides log.flush.interval.messages.",
        optional=True,
        validator=at_least(1),
    )
    .define(
        "flush.ms",
        "long",
        None,
        "Overrides log.flush.interval.ms.",
        optional=True,
        validator=at_least(0),
    )
    .define(
        "message.timestamp.type",
        "string",
        None,
        "Overrides log.message.timestamp.type: `CreateTime` or `LogAppendTime`.",
        optional=True,
        validator=one_of("CreateTime", "LogAppendTime"),
    )
    .define(
        "cleanup.policy",
        "string",
        "delete",
        "Only `delete` (retention) is implemented; compaction is not.",
        validator=one_of("delete"),
    )
)

_LOG_FIELDS = {
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "max.message.bytes": "max_message_bytes",
    "flush.messages": "flush_interval_messages",
    "flush.ms": "flush_interval_ms",
}


def apply_overrides(base: LogConfig, overrides: dict[str, Any]) -> LogConfig:
    """The broker's LogConfig with this topic's validated overrides applied."""
    values = TOPIC_CONFIG.parse(overrides)
    changes = {_LOG_FIELDS[k]: v for k, v in values.items() if k in _LOG_FIELDS and v is not None}
    if values.get("message.timestamp.type") is not None:
        changes["log_append_time"] = values["message.timestamp.type"] == "LogAppendTime"
    return dataclasses.replace(base, **changes)
