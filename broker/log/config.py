"""Per-log settings: Kafka's log.* broker keys and their per-topic overrides, as one value."""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cached_property

from broker.records.log_validator import (
    COMPRESSION_TYPES,
    GZIP_DEFAULT_LEVEL,
    LONG_MAX,
    LZ4_DEFAULT_LEVEL,
    PRODUCER,
    ZSTD_DEFAULT_LEVEL,
    AppendRules,
    compression_level,
)
from broker.util.clock import DAY_MS, HOUR_MS

# Index entries hold positions and relative offsets as int32.
INT32_MAX = 2**31 - 1
# The cleanup policies (Kafka's names).
DELETE, COMPACT = "delete", "compact"
CLEANUP_POLICIES = (DELETE, COMPACT)


def cleanup_policy_problem(policies) -> str | None:
    """What is wrong with a cleanup.policy list (`delete`, `compact` or both), or None."""
    if not policies:
        return "value must be delete, compact or compact,delete"
    unknown = [item for item in policies if item not in CLEANUP_POLICIES]
    if unknown:
        return f"unknown cleanup policy {unknown[0]!r}: value must be delete, compact or both"
    return None


# message.format.version / log.message.format.version: the versions Kafka 3.x
# (MetadataVersion) knows, each as its release ("2.8") and its IV-string ("2.8-IV1").
_RELEASES = {
    "0.8.0": [""],
    "0.8.1": [""],
    "0.8.2": [""],
    "0.9.0": [""],
    "0.10.0": ["IV0", "IV1"],
    "0.10.1": ["IV0", "IV1", "IV2"],
    "0.10.2": ["IV0"],
    "0.11.0": ["IV0", "IV1", "IV2"],
    "1.0": ["IV0"],
    "1.1": ["IV0"],
    "2.0": ["IV0", "IV1"],
    "2.1": ["IV0", "IV1", "IV2"],
    "2.2": ["IV0", "IV1"],
    "2.3": ["IV0", "IV1"],
    "2.4": ["IV0", "IV1"],
    "2.5": ["IV0"],
    "2.6": ["IV0"],
    "2.7": ["IV0", "IV1", "IV2"],
    "2.8": ["IV0", "IV1"],
    "3.0": ["IV0", "IV1"],
    "3.1": ["IV0"],
    "3.2": ["IV0"],
    "3.3": ["IV0", "IV1", "IV2", "IV3"],
    "3.4": ["IV0"],
    "3.5": ["IV0", "IV1", "IV2"],
    "3.6": ["IV0", "IV1", "IV2"],
    "3.7": ["IV0", "IV1", "IV2", "IV3", "IV4"],
    "3.8": ["IV0"],
    "3.9": ["IV0"],
}
MESSAGE_FORMAT_VERSIONS = frozenset(
    [release for release in _RELEASES]
    + [f"{release}-{iv}" for release, ivs in _RELEASES.items() for iv in ivs if iv]
)
# Kafka 3.x's default (IBP 3.0-IV1): with an inter-broker protocol of 3.0 or later, which
# is what this broker speaks, Kafka ignores the key (KIP-724); so do we.
MESSAGE_FORMAT_VERSION_DEFAULT = "3.0-IV1"


def message_format_version_problem(value: str) -> str | None:
    """Kafka 3.x's check of a message format version: the first three dot-separated parts
    of a 0.x version, else the first two, must name a known version ("2.8.1" is "2.8",
    "0.10.0.1" is "0.10.0", "3.0-IV1" is itself)."""
    parts = value.split(".")
    key = ".".join(parts[: 3 if value.startswith("0.") else 2])
    if key in MESSAGE_FORMAT_VERSIONS:
        return None
    return f"Version {value} is not a valid version"


@dataclass(frozen=True)
class LogConfig:
    # log.segment.bytes: roll when the active segment would grow past this.
    segment_bytes: int = 1073741824
    # log.roll.ms: roll when the active segment's first batch is older than this.
    segment_ms: int = 7 * DAY_MS
    # log.retention.ms: delete segments whose newest record is older; -1 = keep forever.
    retention_ms: int = 168 * HOUR_MS
    # log.retention.bytes: delete oldest segments while the log is bigger; -1 = no limit.
    retention_bytes: int = -1
    # log.flush.interval.messages: fsync after this many unflushed messages (default: never).
    flush_interval_messages: int = 2**63 - 1
    # log.flush.interval.ms / flush.ms: fsync when the last flush is this old (default:
    # never, Kafka's Long.MAX).
    flush_interval_ms: int = LONG_MAX
    # log.index.interval.bytes: one offset-index entry per this many bytes of log.
    index_interval_bytes: int = 4096
    # file.delete.delay.ms: keep deleted segments open this long for in-flight fetches.
    file_delete_delay_ms: int = 60000
    # message.max.bytes: the largest batch the log accepts.
    max_message_bytes: int = 1048588
    # message.timestamp.type=LogAppendTime: stamp batches with the append time.
    log_append_time: bool = False
    # Replication settings Kafka keeps per topic too (they are not about the files):
    # min.insync.replicas and unclean.leader.election.enable.
    min_insync_replicas: int = 1
    unclean_leader_election: bool = False
    # log.cleanup.policy / cleanup.policy: "delete" (retention), "compact" (the cleaner
    # keeps the latest record per key), or both.
    cleanup_policy: tuple[str, ...] = (DELETE,)
    # log.cleaner.delete.retention.ms / delete.retention.ms: how long a tombstone stays
    # once the cleaner has seen it (its batch's delete horizon).
    delete_retention_ms: int = DAY_MS
    # log.cleaner.min.cleanable.ratio / min.cleanable.dirty.ratio: clean a log once this
    # share of it has not been cleaned yet.
    min_cleanable_dirty_ratio: float = 0.5
    # log.cleaner.min.compaction.lag.ms / min.compaction.lag.ms: records younger than this
    # stay uncompacted.
    min_compaction_lag_ms: int = 0
    # -- segment files and compaction deadlines (issue 24: topic keys Kafka has) --
    # log.roll.jitter.ms / segment.jitter.ms: each segment rolls up to this much before
    # segment_ms (a random amount chosen when it is created), so partitions created
    # together do not all roll at the same moment.
    segment_jitter_ms: int = 0
    # log.index.size.max.bytes / segment.index.bytes: the largest index file; a segment
    # whose offset or time index is full rolls.
    segment_index_bytes: int = 10485760
    # log.preallocate / preallocate: a new segment's file is created segment_bytes long
    # (sparse) and cut to its data when it rolls or closes.
    preallocate: bool = False
    # log.cleaner.max.compaction.lag.ms / max.compaction.lag.ms: a dirty segment whose
    # first batch is older than this is compacted whatever the dirty ratio (KIP-354),
    # and a compacted log's active segment rolls by then.
    max_compaction_lag_ms: int = LONG_MAX
    # -- append validation: compression and timestamps --
    # (broker/records/log_validator.py applies them; docs/contracts/log.md, "Append
    # validation"). compression.type: the codec the leader stores batches with; `producer`
    # keeps each batch's own, `uncompressed` stores none; the levels are KIP-390's.
    compression_type: str = PRODUCER
    compression_gzip_level: int = GZIP_DEFAULT_LEVEL
    compression_lz4_level: int = LZ4_DEFAULT_LEVEL
    compression_zstd_level: int = ZSTD_DEFAULT_LEVEL
    # message.timestamp.{difference,before,after}.max.ms: how far a CreateTime record's
    # timestamp may lie before / after the leader's clock (LONG_MAX: no limit).
    timestamp_difference_max_ms: int = LONG_MAX
    timestamp_before_max_ms: int = LONG_MAX
    timestamp_after_max_ms: int = LONG_MAX

    @property
    def timestamp_window(self) -> tuple[int, int]:
        """(before, after) as applied: a new key left at its default falls back to the
        deprecated difference.max.ms, as Kafka 3.6+ does while both exist."""
        before, after = self.timestamp_before_max_ms, self.timestamp_after_max_ms
        return (
            self.timestamp_difference_max_ms if before == LONG_MAX else before,
            self.timestamp_difference_max_ms if after == LONG_MAX else after,
        )

    @cached_property
    def append_rules(self) -> AppendRules:
        """What this config asks of a produced batch's records (keys, the CreateTime
        window, the codec); computed once per config, not per produce."""
        codec = COMPRESSION_TYPES[self.compression_type]
        before, after = self.timestamp_window
        return AppendRules(
            codec=codec,
            level=compression_level(
                codec,
                self.compression_gzip_level,
                self.compression_lz4_level,
                self.compression_zstd_level,
            ),
            before_max_ms=before,
            after_max_ms=after,
            log_append_time=self.log_append_time,
            compacted=self.compact,
        )

    @property
    def compact(self) -> bool:
        return COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return DELETE in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """How old the active segment may get: segment_ms, or for a compacted log the
        max compaction lag if sooner (its records cannot be compacted while active)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    def random_segment_jitter(self, rng: random.Random | None = None) -> int:
        """The roll jitter of a new segment: uniform below min(segment_jitter_ms,
        segment_ms), as Kafka chooses it per segment."""
        if self.segment_jitter_ms <= 0:
            return 0
        return (rng or random).randrange(min(self.segment_jitter_ms, self.segment_ms))

    @property
    def init_file_size(self) -> int:
        """The size a new segment file is created with (preallocate)."""
        return self.segment_bytes if self.preallocate else 0

    def __post_init__(self) -> None:
        # Positions in the offset index are int32, so a segment cannot pass 2 GiB.
        if not 0 < self.segment_bytes <= INT32_MAX:
            raise ValueError(f"segment_bytes must be in 1..{INT32_MAX}, not {self.segment_bytes}")
        if self.segment_ms <= 0:
            raise ValueError(f"segment_ms must be positive, not {self.segment_ms}")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index_interval_bytes must be >= 0, not {self.index_interval_bytes}")
        if self.flush_interval_messages <= 0:
            raise ValueError("flush_interval_messages must be positive")
        problem = cleanup_policy_problem(self.cleanup_policy)
        if problem:
            raise ValueError(f"cleanup_policy {self.cleanup_policy}: {problem}")
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise ValueError("min_cleanable_dirty_ratio must be in [0, 1]")
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            # Kafka refuses this pair (at CreateTopics and AlterConfigs) with this message.
            raise ValueError(
                f"conflict topic config setting min.compaction.lag.ms "
                f"({self.min_compaction_lag_ms}) > max.compaction.lag.ms "
                f"({self.max_compaction_lag_ms})"
            )
