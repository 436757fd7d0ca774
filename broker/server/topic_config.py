"""Per-topic configuration overrides (CreateTopics `configs`), declared once like the
broker's keys, with Kafka's topic-level names."""

from __future__ import annotations

import dataclasses
from typing import Any

from broker.config.definition import ConfigDef, ConfigError, at_least, between, one_of
from broker.log.config import LogConfig, cleanup_policy_problem, message_format_version_problem
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


def _tiered_storage_problem(enabled: bool) -> str | None:
    if enabled:
        return (
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage."
        )
    return None


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
    .define(
        "max.compaction.lag.ms",
        "long",
        None,
        "Overrides log.cleaner.max.compaction.lag.ms: a compacted log whose oldest dirty "
        "segment's first batch is older than this is cleaned whatever its dirty ratio, and "
        "its active segment rolls by then (KIP-354).",
        optional=True,
        validator=at_least(1),
        synonyms=("log.cleaner.max.compaction.lag.ms",),
    )
    # -- segment files (issue 24: Kafka's remaining topic keys) --
    .define(
        "segment.jitter.ms",
        "long",
        None,
        "Overrides log.roll.jitter.ms: each new segment rolls a random amount below "
        "min(this, segment.ms) earlier than segment.ms.",
        optional=True,
        validator=at_least(0),
        synonyms=("log.roll.jitter.ms",),
    )
    .define(
        "segment.index.bytes",
        "int",
        None,
        "Overrides log.index.size.max.bytes: the offset index of a segment holds at most "
        "this / 8 entries and its time index this / 12; a segment with a full index rolls.",
        optional=True,
        validator=at_least(4),
        synonyms=("log.index.size.max.bytes",),
    )
    .define(
        "index.interval.bytes",
        "int",
        None,
        "Overrides log.index.interval.bytes: bytes of log between two index entries.",
        optional=True,
        validator=at_least(0),
        synonyms=("log.index.interval.bytes",),
    )
    .define(
        "preallocate",
        "boolean",
        None,
        "Overrides log.preallocate: new segment files are created segment.bytes long and cut "
        "to their data when they roll or close.",
        optional=True,
        synonyms=("log.preallocate",),
    )
    .define(
        "file.delete.delay.ms",
        "long",
        None,
        "Overrides log.segment.delete.delay.ms: how long a segment removed by retention, "
        "compaction or topic deletion stays readable (renamed .deleted) before it is unlinked.",
        optional=True,
        validator=at_least(0),
        synonyms=("log.segment.delete.delay.ms",),
    )
    # -- accepted for Kafka's tools, no effect here (docs/contracts/topic-configs.md) --
    .define(
        "message.format.version",
        "string",
        None,
        "Overrides log.message.format.version. Deprecated and ignored, as by Kafka 3.x with "
        "an inter-broker protocol of 3.0 or later: batches are always stored in the v2 "
        "format. Validated as Kafka does (a known version such as 0.10.2, 2.8 or 3.0-IV1).",
        optional=True,
        validator=message_format_version_problem,
        synonyms=("log.message.format.version",),
    )
    .define(
        "message.downconversion.enable",
        "boolean",
        None,
        "Overrides log.message.downconversion.enable. No effect: this broker never "
        "down-converts (it answers Fetch v4+ only, whose clients read v2 batches).",
        optional=True,
        synonyms=("log.message.downconversion.enable",),
    )
    .define(
        "remote.storage.enable",
        "boolean",
        False,
        "Tiered storage (KIP-405) is not supported: `false` is accepted, `true` is refused as "
        "by a Kafka 3.x broker whose remote.log.storage.system.enable is false.",
        validator=_tiered_storage_problem,
    )
    .define(
        "local.retention.ms",
        "long",
        -2,
        "Tiered storage's local retention (-2: retention.ms). Accepted, no effect: tiered "
        "storage is not supported.",
        validator=at_least(-2),
    )
    .define(
        "local.retention.bytes",
        "long",
        -2,
        "Tiered storage's local retention (-2: retention.bytes). Accepted, no effect: "
        "tiered storage is not supported.",
        validator=at_least(-2),
    )
    .define(
        "remote.log.copy.disable",
        "boolean",
        False,
        "Tiered storage (Kafka 3.8+). Accepted, no effect: tiered storage is not supported.",
    )
    .define(
        "remote.log.delete.on.disable",
        "boolean",
        False,
        "Tiered storage (Kafka 3.9+). Accepted, no effect: tiered storage is not supported.",
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
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "preallocate": "preallocate",
    "file.delete.delay.ms": "file_delete_delay_ms",
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
    string form (what DescribeConfigs shows); None for a key LogConfig does not hold (the
    throttled replicas, the keys without effect): its value is the topic's override, else
    its broker synonym's, else its default (DynamicConfigs.describe_topic)."""
    key = TOPIC_CONFIG.keys[name]
    if name not in _LOG_FIELDS and name not in ("cleanup.policy", "message.timestamp.type"):
        return None
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
    try:
        return dataclasses.replace(base, **changes)
    except ConfigError:
        raise
    except ValueError as exc:  # LogConfig's checks across keys (min > max compaction lag)
        raise ConfigError(str(exc)) from None


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
