"""The aborted-transaction index of one segment (`<base>.txnindex`).

One entry per transaction aborted by a marker in the segment, in marker order, with
Kafka's layout (34 bytes, big-endian): version int16 (0), producerId int64, firstOffset
int64 (the transaction's first batch here), lastOffset int64 (the ABORT marker), and
lastStableOffset int64 (the partition's last stable offset once the marker was written:
an entry whose LSO passes a fetch's upper bound ends the search). A read_committed fetch
sends the entries overlapping its range so the consumer can drop the aborted records
(docs/contracts/log.md, "Transactions").

Entries are few (one per aborted transaction), so they live in memory once read and the
file is appended to; `flush` fsyncs it with its segment. A torn tail (a crash mid-entry)
is cut when the file is read; entries lost that way are re-added by the partition's
producer-state rebuild at start-up.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # read on first use
        self._dirty = False

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        whole = len(data) - len(data) % ENTRY_SIZE
        if whole != len(data):
            os.truncate(self.path, whole)  # a torn last entry
        found = []
        for pos in range(0, whole, ENTRY_SIZE):
            version, *fields = _ENTRY.unpack_from(data, pos)
            if version != VERSION:
                break  # not ours to interpret: keep what came before
            found.append(AbortedTxn(*fields))
        return found

    def append(self, entry: AbortedTxn) -> bool:
        """Add `entry` unless an entry for the same marker is there (a rebuild re-adding
        what survived); False when it was there."""
        entries = self.entries
        if any(e.last_offset == entry.last_offset for e in entries):
            return False
        entries.append(entry)
        entries.sort(key=lambda e: e.last_offset)
        if entries[-1] is entry:
            with open(self.path, "ab") as f:
                f.write(_ENTRY.pack(VERSION, *entry))
        else:
            self._rewrite()
        self._dirty = True
        return True

    def replace(self, entries: list[AbortedTxn]) -> None:
        """Hold exactly `entries` (a cleaned segment taking over its group's)."""
        self._entries = sorted(entries, key=lambda e: e.last_offset)
        if self._entries:
            self._rewrite()
            self._dirty = True
        else:
            self.path.unlink(missing_ok=True)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of markers at or after `offset` (the log was cut there)."""
        entries = self.entries
        keep = [e for e in entries if e.last_offset < offset]
        if len(keep) != len(entries):
            self._entries = keep
            if self.path.exists():
                os.truncate(self.path, len(keep) * ENTRY_SIZE)
            self._dirty = True

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries of transactions overlapping [fetch_offset, upper_bound), and whether
        the search is complete (an entry's LSO reached the bound: later segments can
        hold no aborted transaction that started below it)."""
        found = []
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def _rewrite(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(_ENTRY.pack(VERSION, *e) for e in self._entries or ()))
        os.replace(tmp, self.path)

    def flush(self, sync=None) -> None:
        if self._dirty:
            if self.path.exists():
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    (sync or os.fsync)(fd)
                finally:
                    os.close(fd)
            self._dirty = False

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.rename(self.path, path)
        self.path = path
