"""Per-topic configuration overrides (CreateTopics `configs`), declared once like the
broker's keys, with Kafka's topic-level names."""

from __future__ import annotations

import dataclasses
from typing import Any

from broker.config.definition import ConfigDef, at_least, between, one_of
from broker.log.config import LogConfig, cleanup_policy_problem
from broker.records.log_validator import (
    COMPRESSION_TYPES,
    LZ4_LEVELS,
    ZSTD_LEVELS,
    gzip_level_problem,
)
from broker.server.replication_quota import (
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    throttled_replicas_problem,
)

TOPIC_CONFIG = (
    ConfigDef("Topic overrides (CreateTopics configs; changed by AlterConfigs)")
    .define(
        "retention.ms",
        "long",
        None,
        "Overrides log.retention.ms for this topic.",
        optional=True,
        validator=at_least(-1),
        synonyms=("log.retention.ms",),
    )
    .define(
        "retention.bytes",
        "long",
        None,
        "Overrides log.retention.bytes.",
        optional=True,
        validator=at_least(-1),
        synonyms=("log.retention.bytes",),
    )
    .define(
        "segment.bytes",
        "int",
        None,
        "Overrides log.segment.bytes.",
        optional=True,
        validator=at_least(1024),
        synonyms=("log.segment.bytes",),
    )
    .define(
        "segment.ms",
        "long",
        None,
        "Overrides log.roll.ms.",
        optional=True,
        validator=at_least(1),
        synonyms=("log.roll.ms",),
    )
    .define(
        "max.message.bytes",
        "int",
        None,
        "Overrides message.max.bytes.",
        optional=True,
        validator=at_least(0),
        synonyms=("message.max.bytes",),
    )
    .define(
        "flush.messages",
        "long",
        None,
        "Overrides log.flush.interval.messages.",
        optional=True,
        validator=at_least(1),
        synonyms=("log.flush.interval.messages",),
    )
    .define(
        "flush.ms",
        "long",
        None,
        "Overrides log.flush.interval.ms.",
        optional=True,
        validator=at_least(0),
        synonyms=("log.flush.interval.ms",),
    )
    .define(
        "message.timestamp.type",
        "string",
        None,
        "Overrides log.message.timestamp.type: `CreateTime` or `LogAppendTime`.",
        optional=True,
        validator=one_of("CreateTime", "LogAppendTime"),
        synonyms=("log.message.timestamp.type",),
    )
    .define(
        "min.insync.replicas",
        "int",
        None,
        "Overrides min.insync.replicas.",
        optional=True,
        validator=at_least(1),
        synonyms=("min.insync.replicas",),
    )
    .define(
        "unclean.leader.election.enable",
        "boolean",
        None,
        "Overrides unclean.leader.election.enable.",
        optional=True,
        synonyms=("unclean.leader.election.enable",),
    )
    # -- log compaction (added with the log cleaner, broker/log/cleaner.py) --
    .define(
        "cleanup.policy",
        "list",
        None,
        "Overrides log.cleanup.policy: `delete`, `compact` or `compact,delete`.",
        optional=True,
        validator=cleanup_policy_problem,
        synonyms=("log.cleanup.policy",),
    )
    .define(
        "delete.retention.ms",
        "long",
        None,
        "Overrides log.cleaner.delete.retention.ms.",
        optional=True,
        validator=at_least(0),
        synonyms=("log.cleaner.delete.retention.ms",),
    )
    .define(
        "min.cleanable.dirty.ratio",
        "double",
        None,
        "Overrides log.cleaner.min.cleanable.ratio.",
        optional=True,
        validator=between(0, 1),
        synonyms=("log.cleaner.min.cleanable.ratio",),
    )
    .define(
        "min.compaction.lag.ms",
        "long",
        None,
        "Overrides log.cleaner.min.compaction.lag.ms.",
        optional=True,
        validator=at_least(0),
        synonyms=("log.cleaner.min.compaction.lag.ms",),
    )
    # -- append validation: compression and timestamps (broker/records/log_validator.py) --
    .define(
        "compression.type",
        "string",
        None,
        "Overrides compression.type: `producer`, `uncompressed`, `gzip`, `snappy`, `lz4` or "
        "`zstd`.",
        optional=True,
        validator=one_of(*COMPRESSION_TYPES),
        synonyms=("compression.type",),
    )
    .define(
        "compression.gzip.level",
        "int",
        None,
        "Overrides compression.gzip.level (1..9, or -1).",
        optional=True,
        validator=gzip_level_problem,
        synonyms=("compression.gzip.level",),
    )
    .define(
        "compression.lz4.level",
        "int",
        None,
        "Overrides compression.lz4.level (1..17).",
        optional=True,
        validator=between(*LZ4_LEVELS),
        synonyms=("compression.lz4.level",),
    )
    .define(
        "compression.zstd.level",
        "int",
        None,
        "Overrides compression.zstd.level (-131072..22).",
        optional=True,
        validator=between(*ZSTD_LEVELS),
        synonyms=("compression.zstd.level",),
    )
    .define(
        "message.timestamp.difference.max.ms",
        "long",
        None,
        "Overrides log.message.timestamp.difference.max.ms (deprecated).",
        optional=True,
        validator=at_least(0),
        synonyms=("log.message.timestamp.difference.max.ms",),
    )
    .define(
        "message.timestamp.before.max.ms",
        "long",
        None,
        "Overrides log.message.timestamp.before.max.ms.",
        optional=True,
        validator=at_least(0),
        synonyms=("log.message.timestamp.before.max.ms",),
    )
    .define(
        "message.timestamp.after.max.ms",
        "long",
        None,
        "Overrides log.message.timestamp.after.max.ms.",
        optional=True,
        validator=at_least(0),
        synonyms=("log.message.timestamp.after.max.ms",),
    )
    # -- replication throttles (broker/server/replication_quota.py) --
    .define(
        LEADER_REPLICAS,
        "list",
        [],
        "Replicas (`PARTITION:BROKER,...` or `*`) whose leader throttles their catching-up "
        "followers to leader.replication.throttled.rate (set by reassignments).",
        validator=throttled_replicas_problem,
    )
    .define(
        FOLLOWER_REPLICAS,
        "list",
        [],
        "Replicas (`PARTITION:BROKER,...` or `*`) that, while out of the ISR, fetch at most "
        "follower.replication.throttled.rate (set by reassignments).",
        validator=throttled_replicas_problem,
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
    "min.insync.replicas": "min_insync_replicas",
    "unclean.leader.election.enable": "unclean_leader_election",
    "delete.retention.ms": "delete_retention_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    # -- append validation: compression and timestamps --
    "compression.type": "compression_type",
    "compression.gzip.level": "compression_gzip_level",
    "compression.lz4.level": "compression_lz4_level",
    "compression.zstd.level": "compression_zstd_level",
    "message.timestamp.difference.max.ms": "timestamp_difference_max_ms",
    "message.timestamp.before.max.ms": "timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "timestamp_after_max_ms",
}


def effective_value(name: str, config: LogConfig) -> str | None:
    """Topic key `name` as it applies in `config` (a topic's LogConfig), in the key's
    string form (what DescribeConfigs shows)."""
    key = TOPIC_CONFIG.keys[name]
    if name in (LEADER_REPLICAS, FOLLOWER_REPLICAS):
        return ""  # no broker-wide value: a topic's own or none
    if name == "cleanup.policy":
        return key.format(config.cleanup_policy)
    if name == "message.timestamp.type":
        return "LogAppendTime" if config.log_append_time else "CreateTime"
    return key.format(getattr(config, _LOG_FIELDS[name]))


def apply_overrides(base: LogConfig, overrides: dict[str, Any]) -> LogConfig:
    """The broker's LogConfig with this topic's validated overrides applied."""
    values = TOPIC_CONFIG.parse(overrides)
    changes = {_LOG_FIELDS[k]: v for k, v in values.items() if k in _LOG_FIELDS and v is not None}
    if values.get("cleanup.policy") is not None:
        changes["cleanup_policy"] = tuple(values["cleanup.policy"])
    if values.get("message.timestamp.type") is not None:
        changes["log_append_time"] = values["message.timestamp.type"] == "LogAppendTime"
    return dataclasses.replace(base, **changes)


class TopicConfigs:
    """The per-topic overrides this broker knows (validated), and the LogConfig each topic
    gets: the broker's defaults with its overrides. Filled by the local controller from
    its file on a single broker, from ZooKeeper (/config/topics) in a cluster."""

    def __init__(self, default: LogConfig, overrides: dict[str, dict[str, str]] | None = None):
        # The broker's LogConfig; replaced when a dynamic broker config changes it.
        self.default = default
        self._overrides: dict[str, dict[str, str]] = {}
        for topic, values in (overrides or {}).items():
            self.set(topic, values)

    def set(self, topic: str, overrides: dict[str, str]) -> LogConfig:
        """Record `topic`'s overrides (raises ConfigError for a bad key or value)."""
        config = apply_overrides(self.default, overrides)
        if overrides:
            self._overrides[topic] = dict(overrides)
        else:
            self._overrides.pop(topic, None)
        return config

    def remove(self, topic: str) -> None:
        self._overrides.pop(topic, None)

    def overrides(self, topic: str) -> dict[str, str]:
        return dict(self._overrides.get(topic, {}))

    def all_overrides(self) -> dict[str, dict[str, str]]:
        return {t: dict(v) for t, v in self._overrides.items()}

    def throttled_replicas(self, topic: str, name: str) -> list[str]:
        """`topic`'s leader or follower throttled replicas (`name`), parsed."""
        raw = self._overrides.get(topic, {}).get(name)
        return TOPIC_CONFIG.keys[name].parse(raw) if raw is not None else []

    def log_config(self, topic: str) -> LogConfig:
        return apply_overrides(self.default, self._overrides.get(topic, {}))

    def log_configs(self) -> dict[str, LogConfig]:
        """The topics with overrides and their LogConfig (the rest use the default)."""
        return {topic: self.log_config(topic) for topic in self._overrides}
