"""The log of one partition: an ordered list of segments, the last one active.

Offsets are assigned here, by rewriting each batch's baseOffset and partitionLeaderEpoch
in place (both outside the CRC). Reads hand out FileRegions on the segment files, whole
batches only, so the network layer can sendfile them. The log keeps its leader epochs
(`leader_epochs`, leader_epoch.py) in step with every append, truncation and retention.
See README.md for the on-disk layout, recovery, retention and deletion rules.

Not thread-safe: the broker drives every log from its one event-loop thread.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from broker.log.checkpoint import LEADER_EPOCH_FILE, CorruptCheckpoint
from broker.log.config import INT32_MAX, LONG_MAX, LogConfig
from broker.log.flusher import DeferredSyncs, ThreadFlusher
from broker.log.leader_epoch import LeaderEpochCache
from broker.log.producer_snapshots import (
    delete_snapshot,
    delete_snapshots_outside,
    newest_snapshots,
    write_snapshot,
)
from broker.log.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    parse_segment_name,
)
from broker.log.swap import complete_swaps, swap_steps
from broker.log.txn_index import TXN_INDEX_SUFFIX, AbortedTxn
from broker.records.batch import Record, decode_batch
from broker.records.control import Marker, parse_marker
from broker.records.header import (
    CONTROL,
    HEADER_SIZE,
    TIMESTAMP_TYPE_LOG_APPEND,
    BatchHeader,
    compute_crc,
    set_base_offset,
    set_crc,
    set_leader_epoch,
    write_header,
)
from broker.records.region import FileRegion
from broker.util import clock
from broker.util.files import fsync_dir

log = logging.getLogger(__name__)

# Reads fetch this many bytes of headers per pread (at least the index interval).
_MIN_WINDOW, _MAX_WINDOW = 4096, 65536


class OffsetOutOfRange(ValueError):
    """The offset is below the log start or beyond the log end."""


class RecordTooLarge(ValueError):
    """A batch is bigger than max_message_bytes."""


class LogDeleted(RuntimeError):
    """The log was deleted (or closed) and can no longer be used."""


class KafkaStorageError(RuntimeError):
    """The log's directory is offline after an I/O error (Kafka's KafkaStorageException;
    docs/contracts/log.md, "Log directory failure"): nothing of it is read or written."""


def _storage(method):
    """A Log method that touches its files: refused once the log is offline; an OSError
    (disk full, EIO, read-only file system...) takes its log dir offline, through
    `on_io_error`, and is raised as KafkaStorageError. The write it broke was never
    acknowledged; the recovery at the next start cuts what it left half-written."""

    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        if self.offline:
            raise KafkaStorageError(
                f"{self.topic}-{self.partition}: log dir {self._dir.parent} is offline"
            )
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            self.on_io_error(exc)
            self.offline = True
            raise KafkaStorageError(
                f"{self.topic}-{self.partition}: I/O error in {self._dir.parent}: {exc}"
            ) from exc

    return guarded


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    # Largest batch maxTimestamp (-1 if none) and the base offset of the batch holding it.
    max_timestamp: int
    offset_of_max_timestamp: int


class ReadResult(NamedTuple):
    regions: list[FileRegion]
    # Base offset of the first batch returned (may be below the offset asked for).
    first_batch_offset: int
    size: int


class Log:
    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        segments: list[LogSegment],
        log_start_offset: int,
        now_ms: Callable[[], int],
        leader_epochs: LeaderEpochCache,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self._dir = directory
        self._segments = segments
        self._config = config
        self._window = _window_for(config)
        # Read at every append (a property of the config that looks at two keys).
        self._max_segment_ms = config.max_segment_ms
        self._now_ms = now_ms
        self._log_start_offset = log_start_offset
        self._leader_epochs = leader_epochs
        self._recovery_point = self.log_end_offset
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms()
        # Segment files created since the last directory fsync.
        self._dir_dirty = False
        # A directory created by `_fresh`: neither its entries nor its own entry in the
        # log dir are durable yet; the first flush of data fsyncs both.
        self._dir_new = False
        # Makes the directory's entry in its log dir durable. Its LogManager replaces it
        # with one that fsyncs each log dir once for all the logs created meanwhile.
        # Called with the `sync` of the flush (see flusher.py).
        self.sync_parent: Callable[..., None] = lambda sync=None: fsync_dir(self._dir.parent, sync)
        # Where flushes run their fsyncs: None runs them at once on the caller's thread;
        # the LogManager sets its log dir's ThreadFlusher (README, "Flushes and the
        # event loop"). Flushes in flight, and the highest offset they will make durable.
        self.flusher: ThreadFlusher | None = None
        self._flushes_running = 0
        self._flushing_to = -1
        self._closed = False
        # Told when a flush in the background returned (or failed): appends waiting for
        # it (flush.messages) look again. The LogManager sets it.
        self.on_durable: Callable[[], None] = lambda: None
        # (due time in ms, segment) of deleted segments whose fds stay open for a while.
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._deleted = False
        # Truncations so far: the cleaner drops work that began before one. And the
        # lowest log end a truncation left since the cleaner last asked: its first dirty
        # offset must come down to it.
        self.truncations = 0
        self._lowest_truncation: int | None = None
        # Told the seconds each flush that wrote anything took (its LogManager sets it).
        self.on_flush: Callable[[float], None] = lambda seconds: None
        # Told when this log may have work for its LogManager's tick: a sealed segment to
        # flush, deleted segments to collect, or (with a finite flush.ms) data to flush in
        # time. The tick then looks at these logs only, not at every log each second.
        self.on_due: Callable[[Log], None] = lambda log: None
        # Set when its log dir went offline (see `_storage`); the LogManager sets
        # `on_io_error` to take the whole dir offline.
        self.offline = False
        self.on_io_error: Callable[[OSError], None] = lambda exc: None
        # The bytes of a producer-state snapshot of everything appended so far (its
        # Partition sets it): written at each roll and at close, so a start-up replays
        # the log from there only (docs/contracts/log.md, "Producer-state snapshots").
        self.producer_snapshot: Callable[[], bytes] | None = None
        # The recovery point `open` found: above it the `.txnindex` entries may have been
        # lost with a crash, so the first producer-state load replays from a snapshot at
        # or below it, which re-adds them (docs/contracts/log.md, "Producer-state
        # snapshots").
        self.opened_recovery_point = log_start_offset

    # -- opening ----------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        recovery_point: int = 0,
        now_ms: Callable[[], int] = clock.now_ms,
        log_start_offset: int = 0,
    ) -> Log:
        """Load the segments in `directory` and recover everything from the segment
        holding `recovery_point` on (see `_recover`); then the leader epochs, cut to the
        recovered offsets. A missing `directory` is created with one empty segment:
        nothing to recover and nothing fsynced (see `_fresh`)."""
        interval = config.index_interval_bytes
        try:
            directory.mkdir(parents=True)
        except FileExistsError:
            pass
        else:
            return cls._fresh(directory, topic, partition, config, now_ms, log_start_offset)
        complete_swaps(directory, interval)
        bases = _clean_directory(directory)
        segments = [LogSegment.open(directory, base, interval) for base in bases]
        for segment, following in zip(segments, segments[1:], strict=False):
            segment.next_offset = following.base_offset
        if not segments:
            segments = [_new_segment(directory, log_start_offset, config)]
        replay_from = _recover(segments, recovery_point)
        active = segments[-1]
        active.set_index_size(config.segment_index_bytes)
        active.roll_jitter_ms = config.random_segment_jitter()
        if active.size:
            active.created_ms = now_ms()
        end = active.next_offset
        start = min(max(log_start_offset, segments[0].base_offset), end)
        epochs = _open_leader_epochs(
            directory, segments, f"{topic}-{partition}", config, replay_from, start, end
        )
        delete_snapshots_outside(directory, start, end)
        opened = cls(directory, topic, partition, config, segments, start, now_ms, epochs)
        opened.opened_recovery_point = max(min(recovery_point, end), start)
        log.info(
            "opened log %s-%d: offsets %d..%d, %d segments",
            topic,
            partition,
            start,
            end,
            len(segments),
        )
        return opened

    @classmethod
    def _fresh(
        cls,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        now_ms: Callable[[], int],
        log_start_offset: int,
    ) -> Log:
        """The log of a partition directory just created: one empty segment, no leader
        epochs. Nothing is fsynced: an empty log is re-derivable (a restart that finds the
        directory or its files missing creates them again, and the controller's
        LeaderAndIsr recreates a partition it does not find), so the directory's entries
        and its own entry in the log dir are made durable by the first flush that has
        data to make durable (`flush`), not here. Creating a partition therefore costs
        no disk sync, which matters when one LeaderAndIsr creates thousands."""
        segment = _new_segment(directory, log_start_offset, config)
        name = f"{topic}-{partition}"
        epochs = LeaderEpochCache(directory / LEADER_EPOCH_FILE, (), name)
        created = cls(
            directory, topic, partition, config, [segment], log_start_offset, now_ms, epochs
        )
        created._dir_new = True
        log.info("created log %s-%d at offset %d", topic, partition, log_start_offset)
        return created

    # -- properties -------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = config
        self._window = _window_for(config)
        # Read at every append (a property of the config that looks at two keys).
        self._max_segment_ms = config.max_segment_ms
        for segment in self._segments:
            segment.index_interval = config.index_interval_bytes
        self.on_due(self)  # a new flush.ms may make unflushed data due

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def leader_epochs(self) -> LeaderEpochCache:
        """Which leader epoch appended which offsets (saved in leader-epoch-checkpoint)."""
        return self._leader_epochs

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    # -- appending --------------------------------------------------------------------
    @_storage
    def append(
        self,
        records: bytearray,
        batch_positions: list[tuple[int, BatchHeader]],
        leader_epoch: int,
        log_append_time_ms: int | None = None,
    ) -> AppendInfo:
        """Assign offsets from the log end to the validated batches in `records`, stamp
        them with `leader_epoch` (recorded in `leader_epochs` when it is new) and write
        them. With `log_append_time_ms` the batches are stamped LogAppendTime (which, unlike
        the offsets, is inside the CRC, so those batches get a new CRC)."""
        self._check_live()
        if not batch_positions:
            raise ValueError("nothing to append")
        self._check_sizes(batch_positions)
        offset = self._segments[-1].next_offset
        # Before the write: the epoch file must never miss an epoch the log holds.
        self._leader_epochs.assign(leader_epoch, offset)
        final = []
        for pos, header in batch_positions:
            set_base_offset(records, pos, offset)
            set_leader_epoch(records, pos, leader_epoch)
            # The header with its new base offset and epoch (fields 0 and 2), without
            # NamedTuple._replace's keyword machinery: one per produced batch.
            header = BatchHeader._make((offset, header[1], leader_epoch, *header[3:]))
            if log_append_time_ms is not None:
                header = _stamp_log_append_time(records, pos, header, log_append_time_ms)
            final.append((pos, header))
            offset = header.next_offset
        return self._write(records, final)

    def flush_pending(self, offset: int) -> bool:
        """Whether a flush running in the background will make the records below
        `offset` durable, and has not yet: an append that triggered it
        (flush.messages) is answered once it returned."""
        return self._flushes_running > 0 and self._recovery_point < offset <= self._flushing_to

    @_storage
    def append_as_follower(
        self, records, batch_positions: list[tuple[int, BatchHeader]]
    ) -> AppendInfo:
        """Append batches that already carry their offsets and leader epochs (a replica
        copying its leader); each new epoch among them is recorded in `leader_epochs`."""
        self._check_live()
        if not batch_positions:
            raise ValueError("nothing to append")
        self._check_sizes(batch_positions)
        expected = self.log_end_offset
        for _, header in batch_positions:
            if header.base_offset < expected:
                raise ValueError(f"batch at offset {header.base_offset} is below {expected}")
            expected = header.next_offset
        for _, header in batch_positions:
            if header.partition_leader_epoch >= 0:
                self._leader_epochs.assign(header.partition_leader_epoch, header.base_offset)
        # A follower's flush.messages flush stays on its caller's thread: it fetches
        # again (and so tells its leader it holds these records) only once they are
        # durable, as in Kafka. Only a follower with flush.messages set waits on its disk.
        return self._write(records, batch_positions, inline_flush=True)

    def _check_sizes(self, batch_positions: list[tuple[int, BatchHeader]]) -> None:
        limit = self._config.max_message_bytes
        for _, header in batch_positions:
            if header.size > limit:
                raise RecordTooLarge(
                    f"batch of {header.size} bytes exceeds max_message_bytes {limit}"
                )

    def _write(
        self, records, batches: list[tuple[int, BatchHeader]], inline_flush: bool = False
    ) -> AppendInfo:
        first, last = batches[0][1].base_offset, batches[-1][1].last_offset
        now = self._now_ms()
        segment = self._maybe_roll(len(records), first, last, now)
        segment.append(records, batches, now)
        max_timestamp, offset_of_max, messages = -1, first, 0
        for _, header in batches:
            messages += header.records_count
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.base_offset
        self._unflushed_messages += messages
        if self._unflushed_messages >= self._config.flush_interval_messages:
            self.flush(inline=inline_flush)
        elif self._config.flush_interval_ms != LONG_MAX:
            self.on_due(self)
        return AppendInfo(first, last, max_timestamp, offset_of_max)

    def _maybe_roll(self, size: int, first_offset: int, last_offset: int, now: int) -> LogSegment:
        active = self._segments[-1]
        # Only a follower copying a leader's offsets can jump this far past the log end.
        overflow = last_offset - active.base_offset > INT32_MAX
        if active.size == 0:
            if overflow:
                self._segments[-1] = self._new_segment(first_offset)
                active.close()
                for path in active.paths():
                    path.unlink(missing_ok=True)
                self._move_log_start(self._segments[0].base_offset)
            return self._segments[-1]
        config = self._config
        if (
            active.size + size > config.segment_bytes
            or now - active.created_ms > self._max_segment_ms - active.roll_jitter_ms
            or active.indexes_full
            or overflow
        ):
            active.seal()
            self._snapshot_producers(first_offset)
            self._segments.append(self._new_segment(first_offset))
            self.on_due(self)
        return self._segments[-1]

    @_storage
    def roll(self) -> LogSegment:
        """Seal the active segment and start a new one at the log end (no-op when empty)."""
        self._check_live()
        active = self._segments[-1]
        if active.size == 0:
            return active
        active.seal()
        self._snapshot_producers(self.log_end_offset)
        self._segments.append(self._new_segment(self.log_end_offset))
        self.on_due(self)
        return self._segments[-1]

    def _snapshot_producers(self, offset: int) -> None:
        """Write the producer-state snapshot at `offset` (everything below it appended)."""
        if self.producer_snapshot is not None:
            write_snapshot(self._dir, offset, self.producer_snapshot())

    # -- producer-state snapshots (the bytes are the Partition's) -------------------------
    def producer_snapshots(self, up_to: int | None = None) -> Iterator[tuple[int, bytes]]:
        """(offset, bytes) of the snapshots within the log (at most `up_to`), newest
        first."""
        end = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        return newest_snapshots(self._dir, self._log_start_offset, end)

    def drop_producer_snapshot(self, offset: int) -> None:
        """Delete a snapshot its reader found corrupt."""
        delete_snapshot(self._dir, offset)

    def batches_from(self, offset: int) -> Iterator[tuple[BatchHeader, Marker | None]]:
        """Every batch from the first at or after `offset` to the log end, oldest first,
        each with its transaction marker when it is one: what a producer-state load
        replays after its snapshot (one pread per 64 KiB of headers). A generator, so a
        rebuild of a whole log never holds its headers at once; an OSError takes the log
        dir offline as `_storage` does."""
        self._check_live()
        if self.offline:
            raise KafkaStorageError(f"{self.topic}-{self.partition}: log dir is offline")
        try:
            for segment in self._segments[self._segment_index(offset) :]:
                start = 0
                if segment.base_offset < offset:
                    start = segment.position_of(offset, _MAX_WINDOW)
                for pos, header in segment.headers(start, segment.size, _MAX_WINDOW):
                    marker = None
                    if header.is_control and header.producer_id >= 0:
                        marker = parse_marker(segment.read_batch(pos, header), 0, header)
                    yield header, marker
        except OSError as exc:
            self.on_io_error(exc)
            self.offline = True
            raise KafkaStorageError(f"{self.topic}-{self.partition}: {exc}") from exc

    def _new_segment(self, base_offset: int) -> LogSegment:
        self._dir_dirty = True
        return _new_segment(self._dir, base_offset, self._config)

    # -- reading ----------------------------------------------------------------------
    @_storage
    def read(
        self, offset: int, max_bytes: int, max_offset: int | None = None, min_one: bool = True
    ) -> ReadResult:
        """Whole batches from the one holding `offset`, across segments, up to `max_bytes`,
        never a batch whose base offset is at or past `max_offset` (the high watermark).
        A first batch larger than `max_bytes` comes whole with `min_one` (KIP-74), else
        nothing comes (docs/contracts/fetch.md, "Size limits")."""
        self._check_live()
        end_offset = self.log_end_offset
        if offset < self._log_start_offset or offset > end_offset:
            raise OffsetOutOfRange(
                f"offset {offset} is outside {self._log_start_offset}..{end_offset} "
                f"of {self.topic}-{self.partition}"
            )
        limit_offset = end_offset if max_offset is None else min(max_offset, end_offset)
        if offset >= limit_offset:
            return ReadResult([], offset, 0)
        window = self._window
        regions: list[FileRegion] = []
        total, first_batch_offset = 0, offset
        i = self._segment_index(offset)
        while i < len(self._segments):
            segment = self._segments[i]
            i += 1
            if regions:
                if total >= max_bytes:
                    break
                start = 0
            else:
                found = segment.locate_span(offset, window)
                if found is None:  # only in a gap of offsets: go on with the next segment
                    continue
                start, base, first_size = found
                if base >= limit_offset:
                    break
                first_batch_offset = base
            stops_here = limit_offset < segment.next_offset
            end = segment.position_of(limit_offset, window) if stops_here else segment.size
            budget = max_bytes - total
            if end - start <= budget:
                cut = end
            else:
                cut = segment.boundary_before(start + budget, start, end, window)
                if cut == start and not regions and min_one:
                    cut = start + first_size
                stops_here = True
            if cut > start:
                regions.append(FileRegion(segment.fd, start, cut - start))
                total += cut - start
            if stops_here:
                break
        return ReadResult(regions, first_batch_offset, total)

    def offset_for_timestamp(
        self, timestamp_ms: int, max_offset: int | None = None
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= `timestamp_ms`,
        below `max_offset` (the high watermark); None if there is none.

        The time index picks the segment and where to scan; batch headers find the first
        batch whose maxTimestamp reaches the target; that one batch is decoded to find
        the record, since earlier records of the batch may be older (Kafka answers per
        record). Timestamps need not grow with offsets, so "first" is by offset.
        """
        self._check_live()
        limit = self.log_end_offset if max_offset is None else max_offset
        for segment in self._segments:
            if segment.base_offset >= limit:
                break
            if segment.max_timestamp < timestamp_ms:
                continue
            found = segment.find_timestamp(timestamp_ms, self._window)
            if found is None:
                continue
            for record in _records_of(segment, *found):
                if record.offset >= limit:
                    return None
                if record.offset >= self._log_start_offset and record.timestamp >= timestamp_ms:
                    return record.offset, record.timestamp
        return None

    def max_timestamp_and_offset(self, max_offset: int | None = None) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp below `max_offset`
        (the first such record when several share it); None for an empty log (KIP-734)."""
        self._check_live()
        limit = self.log_end_offset if max_offset is None else max_offset
        best_ts, best_segment, best_batch = -1, None, None  # batch: (position, header)
        for segment in self._segments:
            if segment.base_offset >= limit:
                break
            if segment.next_offset <= limit:
                # Wholly readable: the time index knows its maximum and the batch.
                if segment.max_timestamp > best_ts:
                    best_ts, best_segment = segment.max_timestamp, segment
                    best_batch = segment.locate(segment.offset_of_max_timestamp, self._window)
                continue
            for position, header in segment.headers(0, segment.size, self._window):
                if header.base_offset >= limit:
                    break
                if not header.records_count:  # an empty batch left by the cleaner
                    continue
                timestamp = header.max_timestamp
                if header.next_offset > limit:  # the limit cuts this batch: decode it
                    records = _records_of(segment, position, header)
                    timestamp = max((r.timestamp for r in records if r.offset < limit), default=-1)
                if timestamp > best_ts:
                    best_ts, best_segment, best_batch = timestamp, segment, (position, header)
        if best_segment is None or best_batch is None:
            return None
        for record in _records_of(best_segment, *best_batch):
            if record.timestamp == best_ts and record.offset < limit:
                return record.offset, record.timestamp
        return None

    # -- transactions -----------------------------------------------------------------
    @_storage
    def add_aborted_txn(self, entry: AbortedTxn) -> bool:
        """Index an aborted transaction in the segment holding its ABORT marker (the
        active one when the marker was just appended); False if it was indexed already."""
        self._check_live()
        return self._segments[self._segment_index(entry.last_offset)].txn_index.append(entry)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound): what a
        read_committed fetch of that range must skip (Kafka's collectAbortedTxns)."""
        found: list[AbortedTxn] = []
        for segment in self._segments[self._segment_index(fetch_offset) :]:
            entries, complete = segment.txn_index.collect(fetch_offset, upper_bound)
            found.extend(entries)
            if complete or segment.base_offset >= upper_bound:
                break
        return found

    def _segment_index(self, offset: int) -> int:
        """Index of the segment whose base offset is the largest <= offset."""
        return max(bisect.bisect_right(self._segments, offset, key=_base_offset) - 1, 0)

    # -- durability -------------------------------------------------------------------
    @_storage
    def flush(self, up_to: int | None = None, inline: bool = False) -> None:
        """fsync every segment holding offsets below `up_to` (default: the log end) that
        has unflushed data, then advance the recovery point to it. With a `flusher`
        (and not `inline`) the fsyncs run on its thread and the recovery point moves
        when they returned (`_flush_done`); the page-cache writes happen here."""
        self._check_live()
        target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        epochs = self._leader_epochs
        flusher = None if inline else self.flusher
        # Offsets a background flush in flight covers count only for background ones.
        covered = self._recovery_point
        if flusher is not None:
            covered = max(covered, self._flushing_to)
        if target <= covered and not self._dir_dirty and epochs.synced:
            return
        syncs = DeferredSyncs() if flusher is not None else None
        started = time.perf_counter()
        try:
            for segment in self._segments:
                if segment.next_offset > self._recovery_point and segment.base_offset < target:
                    segment.flush(syncs)
            # The leader epochs are written without fsyncs; the batches below the
            # recovery point are not re-read at open, so their epochs must be durable
            # before it moves (docs/contracts/log.md, "Leader epochs"). The directory
            # sync below covers the file's rename.
            if epochs.sync(syncs):
                self._dir_dirty = True
            if self._dir_dirty or self._dir_new:
                fsync_dir(self._dir, syncs)
                self._dir_dirty = False
            if self._dir_new:
                self.sync_parent(syncs)
                self._dir_new = False
        except BaseException:
            if flusher is not None:
                syncs.close()
            raise
        if target == self.log_end_offset:
            self._unflushed_messages = 0
        self._last_flush_ms = self._now_ms()
        truncations = self.truncations
        if flusher is None:
            self.on_flush(time.perf_counter() - started)
            self._recovery_point = max(self._recovery_point, target)
            return
        self._flushes_running += 1
        self._flushing_to = max(self._flushing_to, target)
        flusher.submit_syncs(
            syncs, lambda error, seconds: self._flush_done(target, truncations, error, seconds)
        )

    def _flush_done(
        self, target: int, truncations: int, error: BaseException | None, seconds: float
    ) -> None:
        """A background flush returned (on the event loop). Its fsyncs were of dups, so
        they covered what the segments held when it was gathered; a truncation since
        may have replaced offsets below `target` with data they did not cover, so then
        the recovery point stays (the next flush moves it)."""
        self._flushes_running -= 1
        if self._flushes_running == 0:
            self._flushing_to = -1
        if error is not None:
            if not self.offline and isinstance(error, OSError):
                self.on_io_error(error)
                self.offline = True
        elif not (self._deleted or self._closed or self.offline):
            self.on_flush(seconds)
            if truncations == self.truncations:
                self._recovery_point = max(self._recovery_point, min(target, self.log_end_offset))
        self.on_durable()

    def _sync_leader_epochs(self) -> None:
        """Make the leader epochs durable (file and name) before the recovery point moves
        other than by `flush` (docs/contracts/log.md, "Leader epochs")."""
        if self._leader_epochs.sync():
            fsync_dir(self._dir)

    @property
    def has_unflushed_sealed_segments(self) -> bool:
        """Rolled segments not yet fsynced (Kafka flushes them right after a roll)."""
        return self._recovery_point < self._segments[-1].base_offset

    # -- truncation and retention -----------------------------------------------------
    @_storage
    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding an offset >= `offset` (replication), and the leader
        epochs that start there. A batch is never split, so the log end may land below
        `offset` if it falls inside a batch. FileRegions already handed out over the
        removed range become invalid; followers only truncate above the high watermark,
        which consumers never read."""
        self._check_live()
        if offset >= self.log_end_offset:
            # Nothing to cut from the log, but an epoch may start at its end with nothing
            # appended (a failed append): the follower truncating here discards it too.
            self._leader_epochs.truncate_from_end(offset)
            return
        now = self._now_ms()
        if offset < self._segments[0].base_offset:
            doomed, self._segments = self._segments, [self._new_segment(offset)]
            self._log_start_offset = offset
        else:
            i = self._segment_index(offset)
            doomed, self._segments = self._segments[i + 1 :], self._segments[: i + 1]
            active = self._segments[-1]
            active.truncate_to(offset)
            active.created_ms = now if active.size else None
        self._schedule_deletion(doomed, now)
        self._recovery_point = min(self._recovery_point, self.log_end_offset)
        self._log_start_offset = min(self._log_start_offset, self.log_end_offset)
        self._leader_epochs.truncate_from_end(self.log_end_offset)
        delete_snapshots_outside(self._dir, self._log_start_offset, self.log_end_offset)
        self._truncated(self.log_end_offset)

    @_storage
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and continue at `offset` (a follower whose log ends below
        its leader's log start: nothing it has is still in the leader's log)."""
        self._check_live()
        now = self._now_ms()
        doomed, self._segments = self._segments, [self._new_segment(offset)]
        self._schedule_deletion(doomed, now)
        self._log_start_offset = offset
        # None of the epochs it knew has a batch left here: what it appends next brings
        # its leader's epochs (as Kafka clears the cache). Durable before the recovery
        # point jumps, or a crash could bring back epochs below the new log start.
        self._leader_epochs.truncate_from_end(0)
        self._sync_leader_epochs()
        # The old log's producers are not the leader's: no snapshot of them may remain.
        delete_snapshots_outside(self._dir, offset + 1, offset)
        self._recovery_point = offset
        self._truncated(offset)

    def _truncated(self, end: int) -> None:
        self.truncations += 1
        if self._lowest_truncation is None or end < self._lowest_truncation:
            self._lowest_truncation = end

    def take_lowest_truncation(self) -> int | None:
        """The lowest log end a truncation left since the last call (None: none did)."""
        lowest, self._lowest_truncation = self._lowest_truncation, None
        return lowest

    # -- compaction (the cleaner's side is cleaner.py) ---------------------------------
    @_storage
    def replace_segments(
        self,
        old: list[LogSegment],
        new: LogSegment,
        now_ms: int | None = None,
        aborted: list[AbortedTxn] | None = None,
    ) -> bool:
        """Swap the cleaned segment `new` (files named `.cleaned`, fsynced, ending where
        `old` ends) in for `old`, consecutive sealed segments of this log, with the
        crash-safe sequence of swap.py (`aborted`: the `.txnindex` entries `new` keeps);
        the old files are renamed `.deleted` and unlinked
        after file_delete_delay_ms, so reads in flight finish. Readers see the old
        segments or the new one: the event loop runs the whole swap in one go.

        Returns False, deleting `new`'s files, when `old` are no longer segments of the
        log (retention deleted or a truncation cut some of them meanwhile)."""
        self._check_live()
        first = next((i for i, s in enumerate(self._segments) if s is old[0]), None)
        still_here = (
            first is not None
            and all(
                a is b for a, b in zip(self._segments[first : first + len(old)], old, strict=False)
            )
            and first + len(old) < len(self._segments)  # never the active segment
        )
        if not still_here:
            new.close()
            for path in new.paths():
                path.unlink(missing_ok=True)
            return False
        # The cleaned segment indexes the aborted transactions whose markers it keeps
        # (`aborted`; None: all of its group's, offsets do not change). A crash before
        # this write loses them from the files; the partition's producer-state rebuild
        # re-adds the recent ones.
        if aborted is None:
            aborted = [entry for segment in old for entry in segment.txn_index.entries]
        for _ in swap_steps(new, old):
            pass
        for segment in old:
            segment.txn_index.path.unlink(missing_ok=True)
        new.txn_index.replace(aborted)
        self._segments[first : first + len(old)] = [new]
        now = self._now_ms() if now_ms is None else now_ms
        self._schedule_deletion(old, now, renamed=True)
        return True

    @_storage
    def delete_expired(self, now_ms: int, high_watermark: int | None = None) -> int:
        """Retention, as Kafka does it: delete the oldest segments whose largest timestamp
        is older than retention_ms, then the oldest while the log exceeds retention_bytes.
        Only segments wholly below `high_watermark` (default: the log end) go. If every
        segment goes, the active one is rolled first so the log keeps an empty segment at
        its end offset. Returns the number of segments deleted."""
        self._check_live()
        hw = self.log_end_offset if high_watermark is None else high_watermark
        config = self._config
        deleted = 0
        if not config.delete:  # cleanup.policy=compact: the cleaner's, not retention's
            self.collect_deleted(now_ms)
            return 0
        if config.retention_ms >= 0:
            count = self._deletable_prefix(
                hw, lambda s: now_ms - s.largest_timestamp() > config.retention_ms
            )
            deleted += self._delete_oldest(count, now_ms)
        if config.retention_bytes >= 0:
            excess = self.size_bytes - config.retention_bytes

            def over_size(segment: LogSegment) -> bool:
                nonlocal excess
                if excess - segment.size < 0:
                    return False
                excess -= segment.size
                return True

            deleted += self._delete_oldest(self._deletable_prefix(hw, over_size), now_ms)
        self.collect_deleted(now_ms)
        return deleted

    def _deletable_prefix(
        self, high_watermark: int, predicate: Callable[[LogSegment], bool]
    ) -> int:
        count = 0
        for i, segment in enumerate(self._segments):
            last = i == len(self._segments) - 1
            if last and segment.size == 0:
                break
            if segment.next_offset > high_watermark or not predicate(segment):
                break
            count += 1
        return count

    def _delete_oldest(self, count: int, now_ms: int) -> int:
        if count == 0:
            return 0
        if count == len(self._segments):
            self.roll()
        doomed, self._segments = self._segments[:count], self._segments[count:]
        for segment in doomed:
            segment.rename_deleted()
        self._schedule_deletion(doomed, now_ms, renamed=True)
        self._move_log_start(self._segments[0].base_offset)
        if self._log_start_offset > self._recovery_point:
            self._sync_leader_epochs()
            self._recovery_point = self._log_start_offset
        log.info(
            "deleted %d segments of %s-%d; log start offset now %d",
            count,
            self.topic,
            self.partition,
            self._log_start_offset,
        )
        return count

    def _move_log_start(self, offset: int) -> None:
        """Raise the log start offset to `offset` (never lowers it); the leader epochs
        follow, so the first epoch starts at the new log start."""
        self._log_start_offset = max(self._log_start_offset, offset)
        self._leader_epochs.truncate_from_start(self._log_start_offset)
        # A snapshot below the log start cannot be replayed from: its segments went.
        delete_snapshots_outside(self._dir, self._log_start_offset, self.log_end_offset)

    def _schedule_deletion(
        self, segments: list[LogSegment], now_ms: int, renamed: bool = False
    ) -> None:
        for segment in segments:
            if not renamed and not self._deleted:
                segment.rename_deleted()
            self._pending_deletes.append((now_ms + self._config.file_delete_delay_ms, segment))
        self.on_due(self)

    @_storage
    def collect_deleted(self, now_ms: int) -> int:
        """Close and unlink deleted segments whose delay is over. Returns how many."""
        due = [s for t, s in self._pending_deletes if t <= now_ms]
        self._pending_deletes = [(t, s) for t, s in self._pending_deletes if t > now_ms]
        for segment in due:
            segment.close()
            if not self._deleted:
                segment.unlink_deleted()
        if self._deleted and not self._pending_deletes:
            shutil.rmtree(self._dir, ignore_errors=True)
        return len(due)

    @property
    def pending_deletions(self) -> int:
        return len(self._pending_deletes)

    # -- end of life ------------------------------------------------------------------
    def delete(self) -> None:
        """Remove the partition (topic deletion): the directory is renamed at once to
        `<topic>-<partition>.<id>-delete`, so the name is free for a new topic, and is
        removed once `file_delete_delay_ms` has passed (`collect_deleted`)."""
        if self._deleted:
            return
        target = self._dir.with_name(f"{self._dir.name}.{uuid.uuid4().hex}-delete")
        self._dir.rename(target)
        self._dir = target
        self._deleted = True
        now = self._now_ms()
        self._schedule_deletion(self._segments, now)
        self._segments = []
        self.collect_deleted(now)

    @property
    def deleted(self) -> bool:
        return self._deleted

    def close(self) -> None:
        """Flush everything (the next open then recovers nothing) and close all files,
        including segments still waiting for their delayed deletion."""
        if self._deleted:
            self.collect_deleted(2**63 - 1)
            return
        if self.offline:  # only close the files: recovery repairs them at the next start
            for segment in self._segments:
                with contextlib.suppress(OSError):
                    segment.close()
            return
        active = self._segments[-1]
        if active.size:  # an empty one has nothing to seal (and may have no index files)
            active.seal()
        self.flush(inline=True)
        # The next start then replays nothing of the log for its producer state.
        self._snapshot_producers(self.log_end_offset)
        for segment in self._segments:
            segment.close()
        self.collect_deleted(2**63 - 1)
        self._closed = True

    def _check_live(self) -> None:
        if self._deleted:
            raise LogDeleted(f"log {self.topic}-{self.partition} was deleted")

    def __repr__(self) -> str:
        return (
            f"Log({self.topic}-{self.partition}, offsets {self.log_start_offset}.."
            f"{self.log_end_offset if self._segments else '?'}, {len(self._segments)} segments)"
        )


def _base_offset(segment: LogSegment) -> int:
    return segment.base_offset


def _new_segment(directory: Path, base_offset: int, config: LogConfig) -> LogSegment:
    """A new active segment as `config` shapes it: preallocated, its index size and its
    own roll jitter (docs/contracts/topic-configs.md)."""
    segment = LogSegment.create(
        directory, base_offset, config.index_interval_bytes, preallocate=config.init_file_size
    )
    segment.set_index_size(config.segment_index_bytes)
    segment.roll_jitter_ms = config.random_segment_jitter()
    return segment


def _window_for(config: LogConfig) -> int:
    """Bytes per header pread: every batch start between two index entries lies within
    index_interval_bytes of the first, so one pread covers a whole gap of the index."""
    return min(max(config.index_interval_bytes, _MIN_WINDOW), _MAX_WINDOW) + HEADER_SIZE


def _clean_directory(directory: Path) -> list[int]:
    """Drop leftovers (deleted segments, index files without a log) and return the base
    offsets of the segments, sorted."""
    bases: list[int] = []
    names = os.listdir(directory)
    for name in names:
        base = parse_segment_name(name)
        if base is not None:
            bases.append(base)
    logs = {f"{base:020d}" for base in bases}
    for name in names:
        stem = name.split(".", 1)[0]
        orphan_index = (
            name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)) and stem not in logs
        )
        if name.endswith(DELETED_SUFFIX) or name.endswith(".tmp") or orphan_index:
            (directory / name).unlink(missing_ok=True)
    return sorted(bases)


def _open_leader_epochs(
    directory: Path,
    segments: list[LogSegment],
    name: str,
    config: LogConfig,
    replay_from: int | None,
    start: int,
    end: int,
) -> LeaderEpochCache:
    """The saved leader epochs, made to match the recovered log (`start`..`end`).

    The file is written without fsyncs (leader_epoch.py), so after a crash it may be
    older or newer than the batches that survived, but only from the recovery point's
    segment on (`replay_from`, None when recovery found nothing beyond the recovery
    point): those entries are replayed from the batches recovery just re-read, and the
    result saved durably before the recovery point moves to the log end. A corrupt file,
    a file missing from a log that holds batches (written before the file existed) or
    one that contradicts the batches is rebuilt from every batch header (one pass)."""
    path = directory / LEADER_EPOCH_FILE
    window = _window_for(config)
    try:
        cache = LeaderEpochCache.read(path, name)
    except CorruptCheckpoint as exc:
        log.error("%s; rebuilding the leader epochs of %s from its batches", exc, name)
        cache = None
    replayed = False
    if cache is None and all(segment.size == 0 for segment in segments):
        cache = LeaderEpochCache(path, (), name)  # no file and nothing to rebuild it from
    elif cache is not None and replay_from is not None:
        replayed = cache.replay(
            replay_from,
            (
                (header.partition_leader_epoch, header.base_offset)
                for segment in segments
                if segment.base_offset >= replay_from
                for _, header in segment.headers(0, segment.size, window)
            ),
            end,
        )
        if not replayed:
            log.warning("%s: leader epochs contradict the batches; rebuilding them", name)
            cache = None
    if cache is None:
        log.info("rebuilding the leader epochs of %s from its batches", name)
        batches = (
            (header.partition_leader_epoch, header.base_offset)
            for segment in segments
            for _, header in segment.headers(0, segment.size, window)
        )
        cache = LeaderEpochCache.rebuild(path, batches, name)
    # Without a replay (nothing beyond the recovery point), only a crash between a
    # truncation or retention and the file's next version can have left entries starting
    # after the log end or below its start. An epoch starting right at the log end stays
    # (Kafka drops it, but takes the epoch from ZooKeeper): it appended nothing that is
    # left, answers OffsetForLeaderEpoch as if it were not there, and keeps the
    # partition's epoch from going back at a restart, e.g. after retention removed every
    # batch.
    cache.truncate_from_end(end + 1)
    cache.truncate_from_start(start)
    if replayed:
        # The version read may exist only in the page cache (the process died, not the
        # machine), and the recovery point moves to the log end: durable first.
        cache.save_durably()
    return cache


def _recover(segments: list[LogSegment], recovery_point: int) -> int | None:
    """Walk and CRC-check every batch of the segment holding `recovery_point` and of all
    later ones, truncating at the first bad or incomplete batch; segments after a
    truncation are deleted. Earlier segments are trusted (flushed) but get their index
    files rebuilt when those are missing or torn.

    What was walked is then fsynced, so the recovery point can move to the log end:
    except a segment that ends at or below `recovery_point` and was not cut, whose data
    is on disk already (after a clean stop that is every log's active segment: start-up
    then reads each log's tail and syncs nothing). Its rebuilt index files are not
    synced; they are checked, and rebuilt if torn, whenever they are loaded.

    Returns the base offset of the first walked segment when anything walked was not
    known durable (beyond the recovery point, or cut), else None: the leader epochs are
    replayed from there (`_open_leader_epochs`)."""
    first = max(bisect.bisect_right(segments, recovery_point, key=_base_offset) - 1, 0)
    for segment in segments[:first]:
        if not segment.index_files_look_sane():
            log.warning("rebuilding missing or torn indexes of %s", segment.log_path)
            segment.recover()
    changed = False
    for i in range(first, len(segments)):
        segment = segments[i]
        truncated = segment.recover()
        if not truncated and segment.next_offset <= recovery_point:
            segment.dirty = False
        changed = changed or segment.dirty
        if truncated and i + 1 < len(segments):
            for later in segments[i + 1 :]:
                log.warning("deleting %s: it follows a truncated segment", later.log_path)
                later.close()
                for path in later.paths():
                    path.unlink(missing_ok=True)
            del segments[i + 1 :]
            break
    if not changed:
        return None
    for segment in segments[first:]:
        if segment.dirty:
            segment.flush()
    fsync_dir(segments[0].dir)
    return segments[first].base_offset


def _records_of(segment: LogSegment, position: int, header: BatchHeader) -> list[Record]:
    """The records of one stored batch (decompressed; control batches hold none)."""
    if header.attributes & CONTROL:
        return []
    return decode_batch(segment.read_batch(position, header))[1]


def _stamp_log_append_time(
    records: bytearray, pos: int, header: BatchHeader, now_ms: int
) -> BatchHeader:
    """Set the LogAppendTime attribute and maxTimestamp, then recompute the CRC over them."""
    header = header._replace(
        attributes=header.attributes | TIMESTAMP_TYPE_LOG_APPEND, max_timestamp=now_ms
    )
    write_header(records, pos, header)
    crc = compute_crc(records, pos, header.size)
    set_crc(records, pos, crc)
    return header._replace(crc=crc)
