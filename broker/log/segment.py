"""One segment of a partition's log: a `.log` file of whole v2 batches plus its two indexes.

A segment knows how to append batches (already carrying their final offsets), walk its
batch headers, rebuild itself from its data (recovery) and find positions by offset or
timestamp. Everything about when to roll, flush or delete lives in `log.py`.

Not thread-safe: the broker drives every log from its one event-loop thread.
"""

from __future__ import annotations

import logging
import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from pathlib import Path

from broker.log.config import INT32_MAX
from broker.log.index import OffsetIndex, TimeIndex
from broker.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from broker.records.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    crc_is_valid,
    parse_header,
)
from broker.util.files import write_all

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
# A cleaned segment being written, and one being swapped in (swap.py).
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)
NAME_DIGITS = 20
# Recovery reads the log sequentially in chunks this big.
RECOVERY_CHUNK = 1 << 20
# baseOffset, batchLength, magic and lastOffsetDelta of a v2 batch header (skipping the
# leader epoch, then the CRC and attributes).
_WALKED = struct.Struct(">qi4xb6xi")
# What a walk stops at (LogSegment._walk).
_HOLDS, _STARTS_AT, _ENDS_PAST = range(3)
# At most this many batches in a segment's tail (a large index.interval.bytes and tiny
# batches): older ones are found through the index.
_TAIL_MAX = 256
MAGIC_V2 = 2


class CorruptSegmentError(Exception):
    """Data below the recovery point does not parse as v2 batches."""


def segment_name(base_offset: int) -> str:
    return f"{base_offset:0{NAME_DIGITS}d}"


def parse_segment_name(file_name: str) -> int | None:
    """Base offset of a `<20 digits>.log` file name, None for anything else."""
    stem, dot, suffix = file_name.partition(".")
    if dot and "." + suffix == LOG_SUFFIX and len(stem) == NAME_DIGITS and stem.isdigit():
        return int(stem)
    return None


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        fd: int,
        size: int,
        index_interval: int,
        suffix: str = "",
    ) -> None:
        self.dir = directory
        self.base_offset = base_offset
        # Appended to every file name: "" for a live segment, CLEANED_SUFFIX or
        # SWAP_SUFFIX while the cleaner writes and swaps one in.
        self.suffix = suffix
        self.fd = fd
        self.size = size
        # Offset after the last batch; the caller sets it for segments it does not walk.
        self.next_offset = base_offset
        # Wall-clock time of the first append (or of opening a non-empty segment): segment_ms.
        self.created_ms: int | None = None
        # Data written since the last fsync.
        self.dirty = False
        name = segment_name(base_offset)
        self.offset_index = OffsetIndex(directory / (name + INDEX_SUFFIX + suffix), base_offset)
        self.time_index = TimeIndex(directory / (name + TIME_INDEX_SUFFIX + suffix), base_offset)
        # Aborted transactions whose ABORT marker is in this segment (never in `paths()`:
        # the cleaner's swap moves the three files above; the log moves this one).
        self.txn_index = TransactionIndex(directory / (name + TXN_INDEX_SUFFIX))
        # Sealed segments load their indexes on first use (memory: 8 B per index entry).
        self._indexes_ready = False
        self._max_timestamp = -1
        self._offset_of_max_timestamp = -1
        self._bytes_since_index_entry = 0
        # The batches appended since the last offset-index entry (base offsets and
        # positions, contiguous to the segment end): a fetch at the log end (a follower,
        # a consumer keeping up) finds its batch here with no index lookup and no walk
        # over the headers in between. Bounded by index.interval.bytes (and _TAIL_MAX).
        self._tail_offsets = array("q")
        self._tail_positions = array("q")
        # ... and their last offsets: a read from the tail needs no header from the file.
        self._tail_ends = array("q")
        # Density of index entries when this segment rebuilds its indexes on its own.
        self.index_interval = index_interval
        # segment.jitter.ms: this segment rolls this much before segment.ms (chosen by
        # the log when it creates the segment).
        self.roll_jitter_ms = 0
        # The file was created longer than its data (preallocate): written with pwrite at
        # `size`, and cut to `size` when sealed or closed.
        self._preallocated = False
        # maxTimestamp of the first batch, read once (None: not read yet).
        self._first_batch_timestamp: int | None = None

    # -- files ------------------------------------------------------------------------
    @property
    def log_path(self) -> Path:
        return self.dir / (segment_name(self.base_offset) + LOG_SUFFIX + self.suffix)

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        index_interval: int,
        suffix: str = "",
        preallocate: int = 0,
    ) -> LogSegment:
        """A new empty segment; with `preallocate` its file is made that long at once
        (sparse, as Kafka's setLength), and what follows the data is zeros until the
        seal cuts it. A crash leaves the zeros; recovery cuts them (no batch has magic 0)."""
        path = directory / (segment_name(base_offset) + LOG_SUFFIX + suffix)
        # Appends go to `size`, not to the end of a preallocated file: no O_APPEND there.
        append = 0 if preallocate else os.O_APPEND
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | append | os.O_CLOEXEC, 0o644)
        segment = cls(directory, base_offset, fd, 0, index_interval, suffix)
        if preallocate:
            os.ftruncate(fd, preallocate)
            segment._preallocated = True
        segment.offset_index.create()
        segment.time_index.create()
        segment._indexes_ready = True
        return segment

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, index_interval: int, suffix: str = ""
    ) -> LogSegment:
        path = directory / (segment_name(base_offset) + LOG_SUFFIX + suffix)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        return cls(directory, base_offset, fd, os.fstat(fd).st_size, index_interval, suffix)

    def set_index_size(self, max_bytes: int) -> None:
        """segment.index.bytes: the most each index of this segment may hold."""
        self.offset_index.set_max_bytes(max_bytes)
        self.time_index.set_max_bytes(max_bytes)

    @property
    def indexes_full(self) -> bool:
        """An index has no room left: the segment must roll before the next append."""
        return self.offset_index.is_full or self.time_index.is_full

    def index_files_look_sane(self) -> bool:
        """The cheap start-up check: both index files exist with whole entries."""
        for index in (self.offset_index, self.time_index):
            try:
                size = index.path.stat().st_size
            except FileNotFoundError:
                return False
            if size % index.ENTRY.size:
                return False
        return True

    def _ensure_indexes(self) -> None:
        if self._indexes_ready:
            return
        ok = (
            self.offset_index.load()
            and self.time_index.load()
            and self.offset_index.is_consistent(self.size, self.next_offset)
            and self.time_index.is_consistent(self.next_offset)
        )
        if not ok:
            log.warning("rebuilding corrupt indexes of %s", self.log_path)
            self.recover()
            return
        # A sealed segment's time index ends with its max timestamp (written at roll).
        last = self.time_index.last()
        if last is not None:
            self._max_timestamp, rel = last
            self._offset_of_max_timestamp = self.base_offset + rel
        self._indexes_ready = True

    # -- writing ----------------------------------------------------------------------
    def append(self, data, batches: list[tuple[int, BatchHeader]], now_ms: int) -> None:
        """Write `data` (whole batches whose headers already carry their final offsets) with
        one write; `batches` are (position in data, header) for each batch."""
        if not self._indexes_ready:
            self._ensure_indexes()
        start = self.size
        try:
            if self._preallocated:
                _pwrite_all(self.fd, data, start)
            else:
                write_all(self.fd, data)
        except OSError:
            # Never leave a torn batch behind a failed write (disk full, I/O error).
            os.ftruncate(self.fd, start)
            raise
        if self.created_ms is None:
            self.created_ms = now_ms
        offsets, positions, interval = self._tail_offsets, self._tail_positions, self.index_interval
        ends = self._tail_ends
        for pos, header in batches:
            if self._index_batch(header, start + pos, interval) or len(offsets) >= _TAIL_MAX:
                del offsets[:], positions[:], ends[:]
            offsets.append(header.base_offset)
            positions.append(start + pos)
            ends.append(header.base_offset + header.last_offset_delta)
        self.size = start + len(data)
        self.next_offset = header.base_offset + header.last_offset_delta + 1  # the last batch's
        self.dirty = True

    def _index_batch(self, header: BatchHeader, position: int, index_interval: int) -> bool:
        """Account for a batch written at `position`; True when it got an index entry."""
        # An empty batch (the cleaner keeps some, see cleaner.py) has no record for a
        # timestamp lookup to land on: its maxTimestamp is not indexed.
        if header.records_count and header.max_timestamp > self._max_timestamp:
            self._max_timestamp = header.max_timestamp
            self._offset_of_max_timestamp = header.base_offset
        if self._bytes_since_index_entry >= index_interval:
            self.offset_index.append_entry(header.base_offset, position)
            self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_index_entry = header.size
            return True
        self._bytes_since_index_entry += header.size
        return False

    def seal(self) -> None:
        """Becoming inactive: record the final max timestamp and write the index files."""
        self._ensure_indexes()
        self._trim()
        self.time_index.maybe_append(
            self._max_timestamp, self._offset_of_max_timestamp, sealing=True
        )
        self.offset_index.write()
        self.time_index.write()
        # A sealed segment is trusted at start-up only if both files are there.
        self.offset_index.ensure_file()
        self.time_index.ensure_file()

    def _trim(self) -> None:
        """Cut a preallocated file to its data: sealed and closed segments end there (the
        next start-up trusts their size)."""
        if self._preallocated and self.fd >= 0:
            os.ftruncate(self.fd, self.size)
            self._preallocated = False
            self.dirty = True

    def flush(self, sync=None) -> None:
        """fsync what changed (`sync`: see broker/log/flusher.py)."""
        if self.dirty:
            (sync or os.fsync)(self.fd)
            self.dirty = False
        if self._indexes_ready:
            self.offset_index.write(fsync=True, sync=sync)
            self.time_index.write(fsync=True, sync=sync)
        self.txn_index.flush(sync)

    # -- recovery ---------------------------------------------------------------------
    def recover(self, verify_crc: bool = True) -> int:
        """Walk every batch from the start, rebuilding the indexes and the max timestamp,
        and truncate the file at the first batch that is incomplete or invalid (bad length,
        magic, offsets or CRC). Returns the number of bytes cut off."""
        self.offset_index.clear()
        self.time_index.clear()
        del self._tail_offsets[:], self._tail_positions[:], self._tail_ends[:]
        self._first_batch_timestamp = None
        self._max_timestamp = self._offset_of_max_timestamp = -1
        self._bytes_since_index_entry = 0
        pos, expected = 0, self.base_offset
        buf, buf_start = b"", 0
        while pos + HEADER_SIZE <= self.size:
            rel = pos - buf_start
            if rel + HEADER_SIZE > len(buf):
                buf, buf_start, rel = os.pread(self.fd, RECOVERY_CHUNK, pos), pos, 0
            header = parse_header(buf, rel)
            if not self._plausible(header, expected, self.size - pos):
                break
            if verify_crc:
                if rel + header.size > len(buf):
                    buf = os.pread(self.fd, max(RECOVERY_CHUNK, header.size), pos)
                    buf_start, rel = pos, 0
                if not crc_is_valid(buf, rel, header):
                    break
            self._index_batch(header, pos, self.index_interval)
            pos += header.size
            expected = header.next_offset
        truncated = self.size - pos
        if truncated:
            log.warning("truncating %s at %d: %d invalid bytes", self.log_path, pos, truncated)
            os.ftruncate(self.fd, pos)
            self.size = pos
        # What was read may exist only in the page cache (the process died, not the
        # machine): the next flush must fsync it before the recovery point covers it.
        self.dirty = True
        self.next_offset = expected
        self.offset_index.rewrite()
        self.time_index.rewrite()
        self._indexes_ready = True
        self.txn_index.truncate_to(expected)
        return truncated

    def _plausible(self, header: BatchHeader, expected: int, remaining: int) -> bool:
        return (
            header.magic == MAGIC_V2
            and header.batch_length >= MIN_BATCH_LENGTH
            and header.size <= remaining
            and header.base_offset >= expected
            and header.last_offset_delta >= 0
            and header.last_offset - self.base_offset <= INT32_MAX
        )

    def truncate_to(self, offset: int) -> None:
        """Drop every batch that holds an offset >= `offset` (a batch is never split)."""
        found = self.locate(offset)
        if found is None:
            return
        os.ftruncate(self.fd, found[0])
        self.size = found[0]
        self.dirty = True
        self.recover(verify_crc=False)

    # -- reading ----------------------------------------------------------------------
    def _window_at(self, position: int, window: int) -> bytes:
        """`window` bytes from `position`, at least a batch header's worth."""
        buf = os.pread(self.fd, window, position)
        if len(buf) < HEADER_SIZE:
            raise CorruptSegmentError(f"{self.log_path}: short batch header at {position}")
        return buf

    def headers(self, position: int, end: int, window: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch starting in [position, end), reading `window`
        bytes per pread so that the headers of many small batches come in one call."""
        buf, buf_start = b"", 0
        while position < end:
            rel = position - buf_start
            if rel + HEADER_SIZE > len(buf):
                buf, buf_start, rel = self._window_at(position, window), position, 0
            header = parse_header(buf, rel)
            if header.magic != MAGIC_V2 or header.batch_length < MIN_BATCH_LENGTH:
                raise CorruptSegmentError(f"{self.log_path}: no v2 batch at {position}")
            yield position, header
            position += header.size

    def locate(
        self, offset: int, window: int = 4096 + HEADER_SIZE
    ) -> tuple[int, BatchHeader] | None:
        """The batch holding `offset` (the first whose last offset is >= it), or None."""
        if offset >= self.next_offset:
            return None
        tail = self._tail_offsets
        if tail and offset >= tail[0]:
            # The batch holding it is the last one starting at or before it, or (in a gap
            # of offsets) the one after.
            start = self._tail_positions[bisect_right(tail, offset) - 1]
        else:
            self._ensure_indexes()
            _, start = self.offset_index.lookup(offset)
        found = self._walk(start, self.size, window, _HOLDS, offset)
        if found is None:
            return None
        position, buf, rel = found
        return position, parse_header(buf, rel)

    def locate_span(
        self, offset: int, window: int = 4096 + HEADER_SIZE
    ) -> tuple[int, int, int] | None:
        """What `locate` finds, as (position, base offset, size): from memory when the
        batch is among the tail's (a fetch at the log end then reads no header)."""
        if offset >= self.next_offset:
            return None
        tail = self._tail_offsets
        if tail and offset >= tail[0]:
            i = bisect_right(tail, offset) - 1
            if self._tail_ends[i] < offset:  # in a gap of offsets: the batch after it
                i += 1  # (one exists: offset < next_offset, the last batch's end + 1)
            positions = self._tail_positions
            position = positions[i]
            end = positions[i + 1] if i + 1 < len(positions) else self.size
            return position, tail[i], end - position
        found = self.locate(offset, window)
        return None if found is None else (found[0], found[1].base_offset, found[1].size)

    def position_of(self, offset: int, window: int) -> int:
        """Position of the first batch whose base offset is >= `offset` (size if none)."""
        if offset >= self.next_offset:
            return self.size
        tail = self._tail_offsets
        if tail and offset >= tail[0]:
            i = bisect_left(tail, offset)
            return self._tail_positions[i] if i < len(tail) else self.size
        self._ensure_indexes()
        _, start = self.offset_index.lookup(offset)
        found = self._walk(start, self.size, window, _STARTS_AT, offset)
        return self.size if found is None else found[0]

    def _walk(
        self, position: int, end: int, window: int, stop: int, target: int
    ) -> tuple[int, bytes, int] | None:
        """The first batch in [position, end) that holds offset `target` (stop=_HOLDS),
        starts at or after it (_STARTS_AT) or ends past position `target` (_ENDS_PAST):
        its position, and the bytes read with its header at `rel`; or None. What
        `headers` does, reading only the four fields a walk needs: an index entry may be
        dozens of small batches before the one a fetch wants, and a whole header each
        costs a NamedTuple."""
        buf, buf_start = b"", 0
        while position < end:
            rel = position - buf_start
            if rel + HEADER_SIZE > len(buf):
                buf, buf_start, rel = self._window_at(position, window), position, 0
            base, length, magic, delta = _WALKED.unpack_from(buf, rel)
            if magic != MAGIC_V2 or length < MIN_BATCH_LENGTH:
                raise CorruptSegmentError(f"{self.log_path}: no v2 batch at {position}")
            following = position + LOG_OVERHEAD + length
            if stop == _HOLDS:
                found = base + delta >= target
            elif stop == _STARTS_AT:
                found = base >= target
            else:
                found = following > target
            if found:
                return position, buf, rel
            position = following
        return None

    def boundary_before(self, limit: int, start: int, end: int, window: int) -> int:
        """The last batch boundary in [start, end] that is <= limit, where `start` and `end`
        are boundaries: the index jumps near `limit`, then a short header walk."""
        if limit >= end:
            return end
        positions = self._tail_positions
        if positions and limit >= positions[0]:
            indexed = positions[bisect_right(positions, limit) - 1]
        else:
            self._ensure_indexes()
            _, indexed = self.offset_index.lookup_position(limit)
        found = self._walk(max(indexed, start), end, window, _ENDS_PAST, limit)
        return end if found is None else found[0]

    def find_timestamp(self, timestamp: int, window: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch holding records whose max timestamp
        >= `timestamp`."""
        self._ensure_indexes()
        before = self.time_index.lookup_before(timestamp)
        start = 0 if before is None else self.offset_index.lookup(before)[1]
        for position, header in self.headers(start, self.size, window):
            if header.records_count and header.max_timestamp >= timestamp:
                return position, header
        return None

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        """The bytes of the batch at `position` (for the few lookups that decode records)."""
        return os.pread(self.fd, header.size, position)

    @property
    def max_timestamp(self) -> int:
        """Largest batch maxTimestamp in the segment, -1 if no batch has one."""
        self._ensure_indexes()
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        self._ensure_indexes()
        return self._offset_of_max_timestamp

    @property
    def first_batch_timestamp(self) -> int:
        """maxTimestamp of the first batch (-1 for an empty segment): what the cleaner
        holds against max.compaction.lag.ms. One header read, then remembered."""
        if self.size == 0:
            return -1
        if self._first_batch_timestamp is None:
            _, header = next(self.headers(0, self.size, HEADER_SIZE))
            self._first_batch_timestamp = header.max_timestamp
        return self._first_batch_timestamp

    def largest_timestamp(self) -> int:
        """What retention compares: the max record timestamp, else the file's mtime (Kafka)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    # -- end of life ------------------------------------------------------------------
    def paths(self) -> list[Path]:
        """The log, index and time index files, in that order."""
        name = segment_name(self.base_offset)
        return [self.dir / (name + kind + self.suffix) for kind in SUFFIXES]

    def set_suffix(self, suffix: str) -> None:
        """Say that the files now carry `suffix` (the swap renames them one by one)."""
        self.suffix = suffix
        self.offset_index.path, self.time_index.path = self.paths()[1:]

    def rename_deleted(self) -> None:
        """Mark for deletion; the fd stays open so in-flight FileRegions still read."""
        for path in (*self.paths(), self.txn_index.path):
            try:
                path.rename(path.with_name(path.name + DELETED_SUFFIX))
            except FileNotFoundError:
                pass

    def close(self) -> None:
        if self.fd >= 0:
            self._trim()
            os.close(self.fd)
            self.fd = -1

    def unlink_deleted(self) -> None:
        for path in (*self.paths(), self.txn_index.path):
            path.with_name(path.name + DELETED_SUFFIX).unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path.name}, size={self.size}, next_offset={self.next_offset})"


def _pwrite_all(fd: int, data, position: int) -> None:
    """Write all of `data` at `position` (a preallocated file: its end is not the data's)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view, position = view[written:], position + written
