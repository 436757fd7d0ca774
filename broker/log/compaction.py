"""What compaction keeps: the decisions of the log cleaner as functions of offsets, sizes,
batches and the clock (no files, no threads; cleaner.py does the I/O).

- `cleanable_range`: which part of a log may be cleaned and how dirty it is.
- `map_batch`: the (key, offset) entries one dirty batch puts in the offset map.
- `clean_batch`: what one batch becomes: itself, rebuilt with fewer records, an empty
  header, or nothing.
- `group_segments`: which old segments are rewritten into one cleaned segment.
- `AbortedRanges`: which data batches belong to aborted transactions (they go, and
  their keys never enter the offset map: an aborted record must not supersede a
  committed one); `MarkerPass`: which transaction markers no batch needs any more (they
  go once their delete horizon passed).

The rules are Kafka's (LogCleaner, LogCleanerManager, KIP-534 delete horizons); where
we differ it is said below.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from broker.log.config import INT32_MAX, LogConfig
from broker.log.offset_map import OffsetMap
from broker.records.compression import decompress
from broker.records.header import CODEC_NONE, HEADER_SIZE, BatchHeader
from broker.records.rewrite import delete_horizon, empty_batch, rebuild_batch
from broker.records.spans import RecordSpan, scan_records


class SegmentInfo(NamedTuple):
    """What the cleaner needs of a segment to choose: offsets, size, newest timestamp."""

    base_offset: int
    next_offset: int
    size: int
    largest_timestamp: int
    # maxTimestamp of its first batch (-1: none): what max.compaction.lag.ms measures.
    first_batch_timestamp: int = -1


class CleanableRange(NamedTuple):
    first_dirty: int  # everything below was cleaned (the cleaner checkpoint)
    first_uncleanable: int  # nothing at or above may be cleaned yet
    clean_bytes: int
    dirty_bytes: int

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def cleanable_range(
    segments: Sequence[SegmentInfo],
    checkpoint: int | None,
    log_start: int,
    high_watermark: int,
    config: LogConfig,
    now_ms: int,
) -> CleanableRange:
    """The dirty part of a log (LogCleanerManager.cleanableOffsets).

    The first dirty offset is the checkpoint, or the log start when there is none or it
    lies outside the log. The first uncleanable offset is the base of the first segment
    that is the active one, that holds an offset at or above the high watermark (Kafka
    stops at the last stable offset, which is never above it), or, with
    min.compaction.lag.ms, whose newest record is younger than the lag. Clean bytes are
    the segments wholly below the first dirty offset; dirty bytes the segments from
    there up to the first uncleanable one (a segment holding the first dirty offset counts
    as dirty: it is read again).
    """
    log_end = segments[-1].next_offset
    first_dirty = checkpoint
    if first_dirty is None or not log_start <= first_dirty <= log_end:
        first_dirty = log_start
    first_uncleanable = segments[-1].base_offset
    for segment in segments[:-1]:
        too_young = (
            config.min_compaction_lag_ms > 0
            and segment.next_offset > first_dirty
            and segment.largest_timestamp > now_ms - config.min_compaction_lag_ms
        )
        if segment.next_offset > high_watermark or too_young:
            first_uncleanable = segment.base_offset
            break
    first_dirty = min(first_dirty, first_uncleanable)
    clean = dirty = 0
    for segment in segments:
        if segment.base_offset >= first_uncleanable:
            break
        if segment.next_offset <= first_dirty:
            clean += segment.size
        else:
            dirty += segment.size
    return CleanableRange(first_dirty, first_uncleanable, clean, dirty)


def max_compaction_delay(
    segments: Sequence[SegmentInfo], first_dirty: int, config: LogConfig, now_ms: int
) -> int:
    """How long past its max.compaction.lag.ms the oldest dirty record of a log is (0:
    not yet), by LogCleanerManager's rule (KIP-354): the earliest first-batch timestamp
    of the dirty segments below the active one, against now - max.compaction.lag.ms.
    A log with a delay is cleaned whatever its dirty ratio."""
    earliest = min(
        (
            s.first_batch_timestamp
            for s in segments[:-1]
            if s.next_offset > first_dirty and s.first_batch_timestamp > 0
        ),
        default=None,
    )
    clean_until = now_ms - max(config.max_compaction_lag_ms, 0)
    if earliest is None or earliest >= clean_until:
        return 0
    return clean_until - earliest


class AbortedRanges:
    """The aborted transactions of a log (its `.txnindex` entries: producer id, first
    offset, marker offset), asked per batch: a transactional data batch of a producer
    whose aborted transaction spans its base offset was aborted."""

    def __init__(self, entries=()) -> None:
        self._by_producer: dict[int, list[tuple[int, int]]] = {}
        for entry in entries:
            self._by_producer.setdefault(entry.producer_id, []).append(
                (entry.first_offset, entry.last_offset)
            )
        for ranges in self._by_producer.values():
            ranges.sort()

    def holds(self, header: BatchHeader) -> bool:
        if header.is_control or not header.is_transactional:
            return False
        ranges = self._by_producer.get(header.producer_id)
        if not ranges:
            return False
        i = bisect.bisect_right(ranges, (header.base_offset, 2**63)) - 1
        return i >= 0 and ranges[i][0] <= header.base_offset < ranges[i][1]


NO_ABORTED = AbortedRanges()


class MarkerPass:
    """One cleaning's walk from the log start, for the markers (Kafka's
    CleanedTransactionMetadata): a marker is still needed while some batch of its
    transaction was read in this walk (a committed batch, or an aborted one this walk
    drops: the next walk will not see it). A marker that ends a transaction with no batch
    left may go, after delete.retention.ms (the delete horizon, as for tombstones), so
    consumers that read the transaction's records see its end."""

    def __init__(self) -> None:
        self._with_batches: set[int] = set()  # producers whose open transaction has batches

    def saw(self, header: BatchHeader) -> None:
        if header.is_transactional and not header.is_control:
            self._with_batches.add(header.producer_id)

    def marker_needed(self, header: BatchHeader) -> bool:
        if header.producer_id in self._with_batches:
            self._with_batches.discard(header.producer_id)
            return True
        return False


def records_of(header: BatchHeader, batch) -> tuple[bytes, list[RecordSpan]]:
    """The uncompressed records section of a stored batch, and its record spans."""
    section = batch[HEADER_SIZE : header.size]
    records = bytes(section) if header.codec == CODEC_NONE else decompress(header.codec, section)
    return records, scan_records(records, header.records_count)


def map_batch(
    header: BatchHeader, batch, first_dirty: int, aborted: AbortedRanges = NO_ABORTED
) -> list[tuple[bytes, int]]:
    """The (key, offset) of every keyed record of a data batch at or after `first_dirty`
    (none for a batch of an aborted transaction)."""
    if header.is_control or header.records_count == 0 or aborted.holds(header):
        return []
    base = header.base_offset
    _, spans = records_of(header, batch)
    return [
        (key, base + delta)
        for _, _, _, _, delta, _, key, _ in spans
        if key is not None and base + delta >= first_dirty
    ]


@dataclass
class CleanStats:
    batches_read: int = 0
    bytes_read: int = 0
    records_read: int = 0
    batches_written: int = 0
    bytes_written: int = 0
    records_kept: int = 0
    map_records: int = 0


class BatchOutcome(NamedTuple):
    data: bytes | None  # what is written in place of the batch; None: nothing
    # The delete horizon of the tombstones it still holds (None: it holds none).
    horizon: int | None


def clean_batch(
    header: BatchHeader,
    batch: bytes,
    offset_map: OffsetMap,
    map_end: int,
    config: LogConfig,
    now_ms: int,
    producer_last_offsets: Mapping[int, int],
    keep_empty: bool,
    stats: CleanStats,
    aborted: AbortedRanges = NO_ABORTED,
    markers: MarkerPass | None = None,
) -> BatchOutcome:
    """What one stored batch becomes when its log is cleaned with `offset_map`, which
    holds the latest offset of every key below `map_end` (Kafka's
    shouldRetainRecord and filterTo):

    - a batch at or past `map_end` is kept as it is;
    - a batch of an aborted transaction loses every record (Kafka's rule);
    - a transaction marker stays while `markers` (the cleaning's walk; None: markers all
      stay) says a batch of its transaction is left; else it gets a delete horizon (now + delete.retention.ms) and goes at the
      first cleaning after it (its header stays, empty, when it is its producer's last
      entry, or `keep_empty`);
    - a record goes if it has no key (a compacted log holds keyed records only), if a
      later offset holds its key, or if it is a tombstone (null value) whose batch's
      delete horizon has passed;
    - a batch keeping every record is copied byte for byte, unless it holds tombstones
      and no delete horizon yet: then it is rebuilt with horizon = now +
      delete.retention.ms (KIP-534), counted from when the cleaner first sees the
      tombstone, so consumers get delete.retention.ms to read it;
    - a batch losing some records is rebuilt from the rest (rewrite.py);
    - a batch losing all of them is dropped, except that its header stays, empty, when
      it is the last batch of a producer still known to the partition (that producer's
      last sequence must survive for idempotence, as Kafka keeps it), or when
      `keep_empty` (the last batch of a cleaned segment: its offsets tell a crash
      repair which old segments the cleaned one replaced, swap.py).
    """
    stats.batches_read += 1
    stats.bytes_read += header.size
    stats.records_read += header.records_count
    if header.is_control and header.records_count and header.base_offset < map_end and markers:
        return _clean_marker(
            header, batch, markers, config, now_ms, producer_last_offsets, keep_empty, stats
        )
    if markers is not None:
        markers.saw(header)
    if header.records_count == 0:  # an empty header left by an earlier cleaning
        needed = keep_empty or _producer_last(header, producer_last_offsets)
        return BatchOutcome(batch if needed else None, None)
    if header.base_offset >= map_end or header.is_control:
        stats.records_kept += header.records_count
        return BatchOutcome(batch, None)
    if aborted.holds(header):
        needed = keep_empty or _producer_last(header, producer_last_offsets)
        return BatchOutcome(empty_batch(header) if needed else None, None)
    records, spans = records_of(header, batch)
    horizon = delete_horizon(header)
    tombstones_go = horizon is not None and now_ms >= horizon
    base = header.base_offset
    latest = offset_map.latest
    kept = []
    tombstones = False
    for span in spans:
        _, _, _, _, delta, _, key, has_value = span
        if key is None or base + delta < latest(key, -1):
            continue
        if not has_value:
            if tombstones_go:
                continue
            tombstones = True
        kept.append(span)
    stats.records_kept += len(kept)
    if not kept:
        if keep_empty or _producer_last(header, producer_last_offsets):
            return BatchOutcome(empty_batch(header), None)
        return BatchOutcome(None, None)
    if tombstones and horizon is None:
        horizon = now_ms + config.delete_retention_ms
        return BatchOutcome(rebuild_batch(header, records, kept, horizon), horizon)
    held = horizon if tombstones else None
    if len(kept) == len(spans):
        return BatchOutcome(batch, held)
    return BatchOutcome(rebuild_batch(header, records, kept), held)


def _clean_marker(
    header: BatchHeader,
    batch: bytes,
    markers: MarkerPass,
    config: LogConfig,
    now_ms: int,
    producer_last_offsets: Mapping[int, int],
    keep_empty: bool,
    stats: CleanStats,
) -> BatchOutcome:
    """A control batch below the map's end: see clean_batch."""
    horizon = delete_horizon(header)
    if markers.marker_needed(header) or header.producer_id < 0:
        stats.records_kept += header.records_count
        return BatchOutcome(batch, None)
    if horizon is not None and now_ms >= horizon:
        if keep_empty or _producer_last(header, producer_last_offsets):
            return BatchOutcome(empty_batch(header), None)
        return BatchOutcome(None, None)
    stats.records_kept += header.records_count
    if horizon is not None:
        return BatchOutcome(batch, horizon)
    horizon = now_ms + config.delete_retention_ms
    records, spans = records_of(header, batch)
    return BatchOutcome(rebuild_batch(header, records, spans, horizon), horizon)


def _producer_last(header: BatchHeader, producer_last_offsets: Mapping[int, int]) -> bool:
    return (
        header.producer_id >= 0
        and producer_last_offsets.get(header.producer_id) == header.last_offset
    )


def group_segments(segments: Sequence[SegmentInfo], max_bytes: int) -> list[list[int]]:
    """Runs of consecutive segments (as indexes into `segments`) each rewritten into one
    cleaned segment: at most `max_bytes` (segment.bytes) of old data, as Kafka groups
    them, and offsets within int32 of the run's base offset (the index holds relative
    offsets)."""
    groups: list[list[int]] = []
    i = 0
    while i < len(segments):
        group, size = [i], segments[i].size
        base = segments[i].base_offset
        i += 1
        while (
            i < len(segments)
            and size + segments[i].size <= max_bytes
            and segments[i].next_offset - 1 - base <= INT32_MAX
        ):
            group.append(i)
            size += segments[i].size
            i += 1
        groups.append(group)
    return groups
