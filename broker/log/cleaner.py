"""The log cleaner: compacts the logs whose cleanup.policy includes `compact`, keeping the
latest record of each key (what compaction keeps: compaction.py; the swap: swap.py).

The work is split between the broker's event loop and the cleaner threads, because a
Log is not thread-safe (the event loop drives it) and cleaning is long CPU work:

1. On the event loop, `grab_filthiest` picks the compacted log with the largest dirty
   ratio above its min.cleanable.dirty.ratio (or whose oldest dirty record passed its
   max.compaction.lag.ms, or whose tombstones are due to go), and
   takes a snapshot: the segments to read, each as a `dup` of its fd (so retention may
   rename, close and unlink the segment meanwhile), their sizes and offsets, the log's
   config, its truncation count, its high watermark and the last batch of each known
   producer. This is the only moment the cleaner looks at a Log.
2. In a cleaner thread, `CleanJob.run` reads only that snapshot: it builds the offset map
   of the dirty part, rewrites the old segments group by group into `.cleaned` segments
   (fsynced) and returns them. It never touches the Log. Segments below the active one
   are never written to, so what it reads cannot change under it, except by a
   truncation, which step 3 detects.
3. Back on the event loop, `apply` swaps each cleaned segment in with
   `Log.replace_segments` (the crash-safe sequence of swap.py), unless the log was
   deleted or truncated meanwhile (then the work is dropped: cleaning later is always
   safe), and records the new first dirty offset in `cleaner-offset-checkpoint`.

Readers therefore see the log before or after a swap, never during one: the swap runs on
the loop in one go, and the old segments' fds stay open for file.delete.delay.ms so
regions already handed to a fetch stay readable.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from broker.cluster import TopicPartition
from broker.log.checkpoint import CLEANER_OFFSET_FILE, read_checkpoint, write_checkpoint
from broker.log.compaction import (
    NO_ABORTED,
    AbortedRanges,
    CleanableRange,
    CleanStats,
    MarkerPass,
    SegmentInfo,
    clean_batch,
    cleanable_range,
    group_segments,
    map_batch,
    max_compaction_delay,
)
from broker.log.config import LogConfig
from broker.log.log import Log
from broker.log.offset_map import OffsetMap
from broker.log.segment import CLEANED_SUFFIX, MAGIC_V2, CorruptSegmentError, LogSegment
from broker.log.txn_index import AbortedTxn
from broker.records.header import HEADER_SIZE, MIN_BATCH_LENGTH, crc_is_valid, parse_header
from broker.util import clock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanerConfig:
    """The log.cleaner.* broker keys (broker/config/server.py)."""

    enabled: bool = True
    threads: int = 1
    # Memory for the offset maps, split between the threads.
    dedupe_buffer_size: int = 128 << 20
    # Bytes read from a segment per pread; also the write buffer.
    io_buffer_size: int = 512 << 10
    # Sleep of a cleaner thread that found nothing to clean.
    backoff_ms: int = 15_000


class PartitionState(NamedTuple):
    """What the cleaner needs to know of a partition beyond its log."""

    high_watermark: int
    # Producer id -> last offset of its last batch, for the producers the partition
    # still tracks: those batches keep their header (compaction.py).
    producer_last_offsets: Mapping[int, int]


class CleanAborted(Exception):
    """The cleaner is stopping."""


class _Source(NamedTuple):
    """An old segment as the job reads it: its own fd, and what it was when snapshotted."""

    segment: LogSegment  # only compared by identity on the loop, never used by the job
    info: SegmentInfo
    fd: int
    mtime_ns: int


@dataclass
class CleanResult:
    topic: str
    partition: int
    first_dirty: int
    map_end: int  # the next first dirty offset
    # (old segments, the cleaned segment replacing them), in offset order.
    swaps: list[tuple[list[LogSegment], LogSegment]] = field(default_factory=list)
    # The earliest delete horizon among the tombstones and markers still kept (None: none).
    earliest_horizon: int | None = None
    # Cleaned segment base offset -> the aborted-transaction entries it keeps: those whose
    # ABORT marker it still holds.
    txn_indexes: dict[int, list[AbortedTxn]] = field(default_factory=dict)
    stats: CleanStats = field(default_factory=CleanStats)
    cpu_seconds: float = 0.0


@dataclass
class CleanJob:
    """One cleaning of one log, built on the event loop, run in a cleaner thread."""

    log: Log  # for the loop's checks only: `run` never touches it
    directory: Path
    sources: list[_Source]
    checked: CleanableRange
    config: LogConfig
    now_ms: int
    producer_last_offsets: Mapping[int, int]
    truncations: int
    map_budget: int
    io_buffer_size: int
    stop: threading.Event
    # The log's aborted transactions below the first uncleanable offset.
    aborted: AbortedRanges = NO_ABORTED
    # The `.txnindex` entries of the sources, for the cleaned segments to keep.
    txn_entries: tuple[AbortedTxn, ...] = ()

    def run(self) -> CleanResult:
        """Build the offset map, then write each group of old segments as one `.cleaned`
        segment (fsynced). Raises CleanAborted when the cleaner stops."""
        started = time.thread_time()
        result = CleanResult(
            self.log.topic, self.log.partition, self.checked.first_dirty, self.checked.first_dirty
        )
        try:
            offset_map = OffsetMap(self.map_budget)
            result.map_end = self._build_map(offset_map, result.stats)
            cleaned = [s for s in self.sources if s.info.base_offset < result.map_end]
            markers = MarkerPass()  # one walk from the log start, group after group
            for group in group_segments([s.info for s in cleaned], self.config.segment_bytes):
                old = [cleaned[i] for i in group]
                new = self._clean_group(old, offset_map, result, markers)
                if new is not None:
                    result.swaps.append(([s.segment for s in old], new))
        except BaseException:
            discard(result)
            raise
        finally:
            for source in self.sources:
                os.close(source.fd)
            result.cpu_seconds = time.thread_time() - started
        return result

    def _build_map(self, offset_map: OffsetMap, stats: CleanStats) -> int:
        """Map every key of the dirty part [first dirty, first uncleanable) to its latest
        offset; returns where the map ends: the first uncleanable offset, or the base of
        the first batch whose keys did not fit (a prefix is cleaned now, the rest later)."""
        first_dirty, end = self.checked.first_dirty, self.checked.first_uncleanable
        mapped_any = False
        for source in self.sources:
            if source.info.next_offset <= first_dirty or source.info.base_offset >= end:
                continue
            for header, batch, _ in self.read_batches(source):
                if header.next_offset <= first_dirty:
                    continue
                entries = map_batch(header, batch, first_dirty, self.aborted)
                if not offset_map.put_all(entries):
                    if not mapped_any:
                        raise ValueError(
                            f"log.cleaner.dedupe.buffer.size is too small for the "
                            f"{len(entries)} keys of one batch of {self.log.topic}-"
                            f"{self.log.partition} at offset {header.base_offset}"
                        )
                    log.info(
                        "offset map of %s-%d full at offset %d: cleaning up to there",
                        self.log.topic,
                        self.log.partition,
                        header.base_offset,
                    )
                    return header.base_offset
                stats.map_records += len(entries)
                mapped_any = True
        return end

    def _clean_group(
        self, old: list[_Source], offset_map: OffsetMap, result: CleanResult, markers: MarkerPass
    ) -> LogSegment | None:
        """Write the survivors of `old` into one `.cleaned` segment named after the first."""
        base = old[0].info.base_offset
        interval = self.config.index_interval_bytes
        for path in LogSegment(self.directory, base, -1, 0, interval, CLEANED_SUFFIX).paths():
            path.unlink(missing_ok=True)  # left by a cleaning that was stopped
        new = LogSegment.create(self.directory, base, interval, CLEANED_SUFFIX)
        try:
            kept_markers = self._write_survivors(old, new, offset_map, result, markers)
            end = old[-1].info.next_offset
            result.txn_indexes[base] = [
                e
                for e in self.txn_entries
                if base <= e.last_offset < end and e.last_offset in kept_markers
            ]
            if new.size == 0:  # cannot happen: the group's last batch is always kept
                raise AssertionError(f"cleaning {old[0].segment} left nothing")
            new.seal()
            new.flush()
            new.next_offset = old[-1].info.next_offset
            new.created_ms = None
            # Keep the last modification time of the group, as Kafka does: retention
            # falls back to it for segments without timestamps.
            os.utime(new.log_path, ns=(old[-1].mtime_ns, old[-1].mtime_ns))
        except BaseException:
            _remove(new)
            raise
        return new

    def _write_survivors(
        self,
        old: list[_Source],
        new: LogSegment,
        offset_map: OffsetMap,
        result: CleanResult,
        markers: MarkerPass,
    ) -> set[int]:
        """Write what survives of `old` into `new`; the offsets of the markers kept."""
        stats = result.stats
        kept_markers: set[int] = set()
        out, positions = bytearray(), []
        for n, source in enumerate(old):
            last_segment = n == len(old) - 1
            for header, batch, last_batch in self.read_batches(source):
                outcome = clean_batch(
                    header,
                    batch,
                    offset_map,
                    result.map_end,
                    self.config,
                    self.now_ms,
                    self.producer_last_offsets,
                    keep_empty=last_segment and last_batch,
                    stats=stats,
                    aborted=self.aborted,
                    markers=markers,
                )
                if outcome.horizon is not None and (
                    result.earliest_horizon is None or outcome.horizon < result.earliest_horizon
                ):
                    result.earliest_horizon = outcome.horizon
                if outcome.data is None:
                    continue
                written = header if outcome.data is batch else parse_header(outcome.data, 0)
                if written.is_control and written.records_count:
                    kept_markers.add(written.base_offset)
                positions.append((len(out), written))
                out += outcome.data
                stats.batches_written += 1
                stats.bytes_written += written.size
                if len(out) >= self.io_buffer_size:
                    new.append(out, positions, self.now_ms)
                    out, positions = bytearray(), []
        if out:
            new.append(out, positions, self.now_ms)
        return kept_markers

    def read_batches(self, source: _Source) -> Iterator[tuple]:
        """(header, bytes, is the segment's last) of every batch of a source, CRC-checked."""
        fd, size, chunk = source.fd, source.info.size, self.io_buffer_size
        pos, buf, buf_start = 0, b"", 0
        while pos < size:
            if self.stop.is_set():
                raise CleanAborted()
            rel = pos - buf_start
            if rel + HEADER_SIZE > len(buf):
                buf, buf_start, rel = os.pread(fd, chunk, pos), pos, 0
                if len(buf) < HEADER_SIZE:
                    raise CorruptSegmentError(f"{source.segment}: short batch header at {pos}")
            header = parse_header(buf, rel)
            if header.magic != MAGIC_V2 or header.batch_length < MIN_BATCH_LENGTH:
                raise CorruptSegmentError(f"{source.segment}: no v2 batch at {pos}")
            if rel + header.size > len(buf):
                buf, buf_start, rel = os.pread(fd, max(chunk, header.size), pos), pos, 0
            if not crc_is_valid(buf, rel, header):
                raise CorruptSegmentError(f"{source.segment}: bad CRC at {pos}")
            pos += header.size
            yield header, buf[rel : rel + header.size], pos >= size


def discard(result: CleanResult) -> None:
    """Remove the cleaned segments of a result that will not be swapped in."""
    for _, new in result.swaps:
        _remove(new)
    result.swaps = []


def _remove(segment: LogSegment) -> None:
    segment.close()
    for path in segment.paths():
        path.unlink(missing_ok=True)


class LogCleaner:
    """Chooses logs, hands their cleaning to threads and swaps the results in (see the
    module doc). Everything but `CleanJob.run` runs on the broker's event loop."""

    def __init__(
        self,
        logs,  # LogManager (not imported: the manager does not know the cleaner)
        config: CleanerConfig = CleanerConfig(),
        now_ms: Callable[[], int] = clock.now_ms,
        partition_state: Callable[[Log], PartitionState | None] | None = None,
    ) -> None:
        self.logs = logs
        self.config = config
        self._now_ms = now_ms
        self._partition_state = partition_state or _whole_log
        self._first_dirty: dict[TopicPartition, int] = {}
        for log_dir in logs.log_dirs:
            self._first_dirty.update(read_checkpoint(Path(log_dir) / CLEANER_OFFSET_FILE))
        # The Log each checkpoint belongs to: a topic deleted and created again starts over.
        self._owner: dict[TopicPartition, Log] = {}
        self._in_progress: set[TopicPartition] = set()
        # Logs whose cleaning failed (a corrupt batch, a full disk), skipped until restart.
        self._uncleanable: dict[TopicPartition, Log] = {}
        self._earliest_horizon: dict[TopicPartition, int] = {}
        self._stop = threading.Event()
        self._executor: ThreadPoolExecutor | None = None

    # -- choosing (event loop) ---------------------------------------------------------
    def first_dirty_offset(self, topic: str, partition: int) -> int | None:
        return self._first_dirty.get((topic, partition))

    def grab_filthiest(self, now_ms: int | None = None) -> CleanJob | None:
        """The job cleaning the dirtiest compacted log whose dirty ratio passes its
        min.cleanable.dirty.ratio, whose oldest dirty record is older than its
        max.compaction.lag.ms, or whose kept tombstones are due to go; None if none."""
        now = self._now_ms() if now_ms is None else now_ms
        best: tuple[float, Log, CleanableRange, PartitionState] | None = None
        for each in self.logs.logs():
            tp = (each.topic, each.partition)
            if not each.config.compact or each.deleted or each.offline or tp in self._in_progress:
                continue
            if self._uncleanable.get(tp) is each:
                continue
            state = self._partition_state(each)
            if state is None:
                continue
            infos = [_info(s) for s in each.segments]
            checked = cleanable_range(
                infos,
                self._checkpoint_of(each),
                each.log_start_offset,
                state.high_watermark,
                each.config,
                now,
            )
            ratio = checked.dirty_ratio
            horizon = self._earliest_horizon.get(tp)
            due = horizon is not None and horizon <= now
            must_clean = (
                ratio > each.config.min_cleanable_dirty_ratio
                or max_compaction_delay(infos, checked.first_dirty, each.config, now) > 0
            )
            if not ((checked.dirty_bytes and must_clean) or due):
                continue
            if best is None or ratio > best[0]:
                best = (ratio, each, checked, state)
        if best is None:
            return None
        _, chosen, checked, state = best
        self._in_progress.add((chosen.topic, chosen.partition))
        return self._job(chosen, checked, state, now)

    def _checkpoint_of(self, each: Log) -> int | None:
        tp = (each.topic, each.partition)
        owner = self._owner.setdefault(tp, each)
        if owner is not each:  # the partition was deleted and created again
            self._owner[tp] = each
            self._first_dirty.pop(tp, None)
            self._earliest_horizon.pop(tp, None)
        lowest = each.take_lowest_truncation()
        checkpoint = self._first_dirty.get(tp)
        if lowest is not None and checkpoint is not None and lowest < checkpoint:
            # A truncation removed offsets we had cleaned: what comes there is dirty.
            self._first_dirty[tp] = checkpoint = lowest
        return checkpoint

    def _job(
        self, chosen: Log, checked: CleanableRange, state: PartitionState, now: int
    ) -> CleanJob:
        # Every segment from the log start up to the first uncleanable one is rewritten
        # (the clean part loses the records the dirty part supersedes).
        sources = []
        for segment in chosen.segments:
            if segment.base_offset >= checked.first_uncleanable:
                break
            fd = os.dup(segment.fd)
            sources.append(_Source(segment, _info(segment), fd, os.fstat(fd).st_mtime_ns))
        return CleanJob(
            log=chosen,
            directory=chosen.dir,
            sources=sources,
            checked=checked,
            config=chosen.config,
            now_ms=now,
            producer_last_offsets=dict(state.producer_last_offsets),
            truncations=chosen.truncations,
            map_budget=self.config.dedupe_buffer_size // self.config.threads,
            io_buffer_size=self.config.io_buffer_size,
            stop=self._stop,
            aborted=AbortedRanges(
                chosen.aborted_transactions(chosen.log_start_offset, checked.first_uncleanable)
            ),
            txn_entries=tuple(e for s in sources for e in s.segment.txn_index.entries),
        )

    # -- swapping in (event loop) ------------------------------------------------------
    def apply(self, job: CleanJob, result: CleanResult) -> bool:
        """Swap the cleaned segments in and move the checkpoint; False (the work
        dropped) when the log was deleted or truncated since the job was taken."""
        chosen = job.log
        tp = (chosen.topic, chosen.partition)
        self._in_progress.discard(tp)
        if (
            chosen.deleted
            or chosen.truncations != job.truncations
            or self.logs.get(*tp) is not chosen
        ):
            log.info("dropping the cleaning of %s-%d: the log changed meanwhile", *tp)
            discard(result)
            return False
        swapped = 0
        for old, new in result.swaps:
            if chosen.replace_segments(old, new, aborted=result.txn_indexes.get(new.base_offset)):
                swapped += 1
        result.swaps = []
        self._first_dirty[tp] = result.map_end
        if result.earliest_horizon is None:
            self._earliest_horizon.pop(tp, None)
        else:
            self._earliest_horizon[tp] = result.earliest_horizon
        self.write_checkpoints(chosen.dir.parent)
        stats = result.stats
        log.info(
            "cleaned %s-%d up to offset %d, %d segments swapped in: %d of %d records kept, "
            "%d bytes read, %d written, %.3f s CPU",
            chosen.topic,
            chosen.partition,
            result.map_end,
            swapped,
            stats.records_kept,
            stats.records_read,
            stats.bytes_read,
            stats.bytes_written,
            result.cpu_seconds,
        )
        return True

    def abandon(self, job: CleanJob, result: CleanResult | None = None) -> None:
        self._in_progress.discard((job.log.topic, job.log.partition))
        if result is not None:
            discard(result)

    def write_checkpoints(self, only: Path | None = None) -> None:
        """Write `cleaner-offset-checkpoint` of each log dir (or of `only`): the first
        dirty offset of every compacted log cleaned at least once."""
        live = {(each.topic, each.partition): each for each in self.logs.logs()}
        for log_dir in self.logs.log_dirs:
            log_dir = Path(log_dir)
            if only is not None and log_dir != only:
                continue
            entries = {
                tp: offset
                for tp, offset in self._first_dirty.items()
                if tp in live and live[tp].dir.parent == log_dir
            }
            write_checkpoint(log_dir / CLEANER_OFFSET_FILE, entries)

    # -- running -----------------------------------------------------------------------
    def clean_once(self, now_ms: int | None = None) -> CleanResult | None:
        """Choose, clean and swap in one log in the calling thread (tests and tools);
        None when no log needs cleaning."""
        job = self.grab_filthiest(now_ms)
        if job is None:
            return None
        try:
            result = job.run()
        except BaseException:
            self.abandon(job)
            raise
        self.apply(job, result)
        return result

    async def run(self) -> None:
        """Clean logs until cancelled, with log.cleaner.threads threads."""
        self._executor = ThreadPoolExecutor(self.config.threads, thread_name_prefix="log-cleaner")
        await asyncio.gather(*(self._run_one() for _ in range(self.config.threads)))

    async def _run_one(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            job = None
            try:
                job = self.grab_filthiest()
                if job is None:
                    await asyncio.sleep(self.config.backoff_ms / 1000)
                    continue
                result = await loop.run_in_executor(self._executor, job.run)
            except asyncio.CancelledError:
                if job is not None:
                    self.abandon(job)
                raise
            except CleanAborted:
                self.abandon(job)
                return
            except Exception as exc:
                if job is None:
                    log.exception("choosing a log to clean failed")
                elif isinstance(exc, OSError):
                    # Its log dir is failing (docs/contracts/log.md, "Log directory
                    # failure"): it goes offline, told here on the event loop.
                    job.log.on_io_error(exc)
                    self.abandon(job)
                elif job.log.deleted or job.log.truncations != job.truncations:
                    # A truncation cut what the job was reading: nothing is wrong.
                    log.info("dropping the cleaning of %s-%d: the log changed", *_tp(job))
                    self.abandon(job)
                else:
                    log.exception(
                        "cleaning %s-%d failed; it is not cleaned again until restart",
                        *_tp(job),
                    )
                    self._uncleanable[_tp(job)] = job.log
                    self.abandon(job)
                await asyncio.sleep(self.config.backoff_ms / 1000)
                continue
            try:
                self.apply(job, result)
            except Exception:
                log.exception(
                    "swapping the cleaned segments of %s-%d failed",
                    job.log.topic,
                    job.log.partition,
                )

    def shutdown(self) -> None:
        """Stop the threads (a cleaning in progress stops at its next batch and removes
        its files) and wait for them. Call after cancelling `run`, before closing logs."""
        self._stop.set()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


def _tp(job: CleanJob) -> TopicPartition:
    return job.log.topic, job.log.partition


def _info(segment: LogSegment) -> SegmentInfo:
    return SegmentInfo(
        segment.base_offset,
        segment.next_offset,
        segment.size,
        segment.largest_timestamp(),
        segment.first_batch_timestamp,
    )


def _whole_log(each: Log) -> PartitionState:
    """Without a partition (tests, tools): everything up to the log end, no producers."""
    return PartitionState(each.log_end_offset, {})
