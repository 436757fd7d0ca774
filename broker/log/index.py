"""The two sparse indexes of a segment: offset -> file position, and timestamp -> offset.

Both are plain append-only files of fixed-size big-endian entries (no preallocation, so
a file's size is always a whole number of entries unless a write was torn, which the
sanity check catches). A new segment's files appear with their first entry or when it is
sealed; an active segment may have none (recovery walks it and writes them). Entries
live in memory as two parallel arrays, searched with bisect; the file only catches up on
flush/roll/close, because a crash before a flush leaves those segments above the
recovery point, and recovery rebuilds their indexes.

- `.index`: relative offset int32 (offset - segment base) + file position int32 of the
  batch that starts at that offset. Keys are batch *base* offsets, so a lookup for any
  offset inside an indexed batch lands on that batch itself.
- `.timeindex`: timestamp int64 + relative offset int32: the largest batch maxTimestamp
  seen so far in the segment and the base offset of the batch that first reached it.
  Timestamps strictly increase along the file.

Each index holds at most `max_entries` (segment.index.bytes / entry size, as Kafka sizes
its index files); a segment with a full index takes no more entries and rolls at its
next append (log.py).
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path

from broker.log.config import INT32_MAX
from broker.util.files import write_all


class SparseIndex:
    """Sorted (key, value) entries of one index file; subclasses fix the entry layout."""

    ENTRY: struct.Struct
    KEY_TYPE: str

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.keys = array(self.KEY_TYPE)
        self.values = array("i")
        # Entries [0, _written) are already in the file; the rest are pending.
        self._written = 0
        # The file is known to be on disk (fsynced) as it is now.
        self._synced = False
        # False for a new segment's index until its first entry or its seal (`create`).
        self._exists = True
        # segment.index.bytes // ENTRY.size for an active segment (`set_max_bytes`).
        self.max_entries = INT32_MAX

    def set_max_bytes(self, max_bytes: int) -> None:
        self.max_entries = max_bytes // self.ENTRY.size

    @property
    def is_full(self) -> bool:
        return len(self.keys) >= self.max_entries

    def __len__(self) -> int:
        return len(self.keys)

    def load(self) -> bool:
        """Read the file into memory; False if it is missing, torn or out of order."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(data) % self.ENTRY.size:
            return False
        keys, values = array(self.KEY_TYPE), array("i")
        for key, value in self.ENTRY.iter_unpack(data):
            keys.append(key)
            values.append(value)
        if not _strictly_increasing(keys) or not _non_decreasing(values):
            return False
        self.keys, self.values, self._written = keys, values, len(keys)
        return True

    def append(self, key: int, value: int) -> None:
        self.keys.append(key)
        self.values.append(value)

    def last(self) -> tuple[int, int] | None:
        if not self.keys:
            return None
        return self.keys[-1], self.values[-1]

    def floor(self, key: int) -> int:
        """Index of the last entry whose key is <= key, or -1."""
        return bisect.bisect_right(self.keys, key) - 1

    def truncate_entries(self, count: int) -> None:
        """Keep only the first `count` entries, in memory and in the file."""
        del self.keys[count:]
        del self.values[count:]
        if count < self._written:
            os.truncate(self.path, count * self.ENTRY.size)
            self._written = count
            self._synced = False

    def clear(self) -> None:
        self.truncate_entries(0)

    def write(self, fsync: bool = False, sync=None) -> None:
        """Append the pending entries to the file (creating it), optionally fsync it
        (with `sync`: see broker/log/flusher.py)."""
        if self._written == len(self.keys) and (self._synced or not fsync):
            return
        pending = b"".join(
            self.ENTRY.pack(self.keys[i], self.values[i])
            for i in range(self._written, len(self.keys))
        )
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        self._exists = True
        try:
            if pending:
                write_all(fd, pending)
            if fsync:
                (sync or os.fsync)(fd)
        finally:
            os.close(fd)
        self._synced = fsync or (self._synced and not pending)
        self._written = len(self.keys)

    def rewrite(self) -> None:
        """Replace the file with exactly the in-memory entries (after a rebuild)."""
        self._written = 0
        self._synced = False
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        os.close(fd)
        self._exists = True
        self.write()

    def create(self) -> None:
        """The index of a new segment: empty, and its file not created until its first
        entry is written or the segment is sealed (`ensure_file`), so creating a segment
        (a partition) opens one file, not three. It counts as synced: it holds no data,
        and an index file missing after a crash is rebuilt."""
        self.keys, self.values = array(self.KEY_TYPE), array("i")
        self._written = 0
        self._synced = True
        self._exists = False

    def ensure_file(self) -> None:
        """Create the (empty) file if `create` left it out: a sealed segment has both."""
        if not self._exists:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
            os.close(fd)
            self._exists = True


class OffsetIndex(SparseIndex):
    """Relative batch base offset -> file position of that batch."""

    ENTRY = struct.Struct(">ii")
    KEY_TYPE = "i"

    def append_entry(self, offset: int, position: int) -> None:
        if not self.is_full:
            self.append(offset - self.base_offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last indexed batch starting at or before `offset`;
        the segment start when none does."""
        i = self.floor(offset - self.base_offset)
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.keys[i], self.values[i]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the last indexed batch starting at or before `position`."""
        i = bisect.bisect_right(self.values, position) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.keys[i], self.values[i]

    def entries_below(self, offset: int) -> int:
        """How many entries index batches starting before `offset` (for truncation)."""
        return bisect.bisect_left(self.keys, offset - self.base_offset)

    def is_consistent(self, log_size: int, next_offset: int) -> bool:
        """Every entry points inside the segment's data and offsets."""
        if not self.keys:
            return True
        return (
            self.keys[0] >= 0
            and self.values[0] >= 0
            and self.values[-1] < log_size
            and self.base_offset + self.keys[-1] < next_offset
        )


class TimeIndex(SparseIndex):
    """Max timestamp so far -> relative base offset of the batch that first reached it."""

    ENTRY = struct.Struct(">qi")
    KEY_TYPE = "q"

    @property
    def is_full(self) -> bool:
        # One entry is kept for the seal's: a sealed segment's time index must end with
        # its max timestamp (what retention compares after a restart).
        return len(self.keys) >= self.max_entries - 1

    def maybe_append(self, timestamp: int, offset: int, sealing: bool = False) -> None:
        """Add an entry only when the max timestamp grew (keys stay strictly increasing)."""
        if timestamp < 0 or (self.keys and timestamp <= self.keys[-1]):
            return
        if self.is_full and not sealing:
            return
        self.append(timestamp, offset - self.base_offset)

    def max_timestamp(self) -> int:
        """Largest timestamp indexed, -1 if none (a sealed segment's last entry is its max)."""
        return self.keys[-1] if self.keys else -1

    def lookup_before(self, timestamp: int) -> int | None:
        """Offset of the last entry whose timestamp is < `timestamp`: every batch up to and
        including the one at that offset is older than `timestamp`. None if no entry is."""
        i = bisect.bisect_left(self.keys, timestamp) - 1
        if i < 0:
            return None
        return self.base_offset + self.values[i]

    def entries_below(self, offset: int) -> int:
        """How many entries point at batches starting before `offset` (values ascend)."""
        return bisect.bisect_left(self.values, offset - self.base_offset)

    def is_consistent(self, next_offset: int) -> bool:
        if not self.keys:
            return True
        return self.values[0] >= 0 and self.base_offset + self.values[-1] < next_offset


def _strictly_increasing(a: array) -> bool:
    return all(x < y for x, y in zip(a, a[1:], strict=False))


def _non_decreasing(a: array) -> bool:
    return all(x <= y for x, y in zip(a, a[1:], strict=False))
