"""The leader epochs of one partition's log: which epoch's leader appended which offsets.

Kafka's LeaderEpochFileCache (KIP-101, KIP-279), written from its rules: a list of
(epoch, start offset) entries, strictly increasing in both, one per epoch that appended
to this log, the start offset being the first offset appended in that epoch. Every batch
carries the epoch of the leader that appended it (`partitionLeaderEpoch`), so the list
can always be rebuilt from the log's batches; the file `leader-epoch-checkpoint` beside
the segments saves walking them at every start.

A follower asks its leader, with OffsetForLeaderEpoch, where its latest epoch ends in the
leader's log (`end_offset_for`) and truncates its own log there: the exact point where
the two logs diverge, never blindly its high watermark. Consumers ask the same (KIP-320)
to detect that the log they read was truncated under them.

The cache in memory is authoritative; the file lags it. A change (a new epoch, a
truncation, retention) only marks the cache dirty and tells `on_dirty`: the log manager
writes the dirty files (`write`) in slices from its once-a-second tick, atomically
(renamed into place) and WITHOUT fsyncs. A leader election on thousands of partitions thus costs
neither thousands of disk syncs nor thousands of file replacements while the election is
being answered. Durability follows the log's recovery point instead
(docs/contracts/log.md, "Leader epochs"):

- `sync` writes the file if it is dirty and makes its current version durable; the log
  calls it before its recovery point moves (`Log.flush`, and the moves retention and a
  follower's restart at its leader's log start make), so every batch below the recovery
  point has its epoch in the durable version of the file and in every later one;
- every batch above the recovery point carries its epoch and is re-read at open, so a
  file that misses epochs those batches hold (not written yet when the process died) is
  repaired from them (next point);
- at open, when recovery found batches beyond the recovery point (it re-reads those
  from the segment holding it), `replay` replaces the entries from that segment on
  with those the re-read batches give, keeping only an entry starting right at the log
  end (an epoch that led but appended nothing left), and the result is saved with
  fsyncs before the recovery point moves to the log end. Whichever version of the file
  survives a crash, older or newer than the surviving batches, is thus repaired
  exactly; a file that does not parse, or whose entries before that segment contradict
  the batches, is rebuilt from every batch.

What a crash (of the process before the file is written, or of the machine before
the next flush) can still lose is an epoch that appended nothing: its entry starts at the
log end and no batch carries it. That epoch then answers OffsetForLeaderEpoch as
an epoch this log never saw, as Kafka answers after it drops such an entry at load, and
the controller's next LeaderAndIsr brings the partition's epoch from ZooKeeper.

Not thread-safe: the broker drives every log from its one event-loop thread.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from broker.log.checkpoint import CorruptCheckpoint, read_entry_lines, write_entry_lines
from broker.util.files import fsync_file

log = logging.getLogger(__name__)

# What OffsetForLeaderEpoch answers when it knows nothing (Kafka's constants).
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    def __init__(
        self,
        path: Path,
        entries: Iterable[EpochEntry] = (),
        name: str = "",
    ) -> None:
        self.path = Path(path)
        self._entries: list[EpochEntry] = []
        self._name = name or self.path.parent.name
        # The entries differ from the file's (not written yet), and the file holds a
        # version not fsynced yet (see the module doc).
        self._dirty = False
        self._unsynced = False
        # Told when the cache becomes dirty: whoever writes the files later (the
        # log manager) notes it; until then, only `sync` (a flush, a close) writes it.
        self.on_dirty: Callable[[LeaderEpochCache], None] = _ignore
        for entry in entries:
            self._add(EpochEntry(*entry))

    # -- reading and rebuilding -------------------------------------------------------
    @classmethod
    def read(cls, path: Path, name: str = "") -> LeaderEpochCache | None:
        """The cache saved at `path`; None if there is no file. A file that does not parse,
        or whose entries are negative or not strictly increasing, is CorruptCheckpoint."""
        lines = read_entry_lines(path)
        if lines is None:
            return None
        entries = []
        for line in lines:
            fields = line.split(" ")
            try:
                epoch, start_offset = fields
                entries.append(EpochEntry(int(epoch), int(start_offset)))
            except ValueError:
                raise CorruptCheckpoint(f"{path}: malformed line {line!r}") from None
        try:
            return cls(path, entries, name)
        except ValueError as exc:
            raise CorruptCheckpoint(f"{path}: {exc}") from None

    @classmethod
    def rebuild(
        cls, path: Path, batches: Iterable[tuple[int, int]], name: str = ""
    ) -> LeaderEpochCache:
        """The cache of a log whose batches are `batches` ((partitionLeaderEpoch, base
        offset), oldest first), assigned as appends do, and saved at `path`. Batches with
        no epoch (-1) are skipped."""
        cache = cls(path, (), name)
        for epoch, base_offset in batches:
            if epoch >= 0:
                cache._assign(EpochEntry(epoch, base_offset))
        cache.save_durably()
        return cache

    def replay(
        self, from_offset: int, batches: Iterable[tuple[int, int]], log_end_offset: int
    ) -> bool:
        """Recovery: replace the entries starting at or after `from_offset` with those
        that `batches` give ((partitionLeaderEpoch, base offset) of every batch of the log
        from `from_offset` on, oldest first; -1 skipped), keeping an entry of the old ones
        that starts exactly at `log_end_offset` (an epoch that appended nothing left) when
        it is above them. Saves nothing (the caller does, see `save_durably`).

        Returns False, changing nothing, when a batch carries an epoch below the latest
        entry kept before `from_offset` (or below an earlier batch's): those entries do
        not describe this log, and the caller rebuilds them from every batch."""
        keep = bisect.bisect_left(self._entries, from_offset, key=_start_offset)
        entries, dropped = self._entries[:keep], self._entries[keep:]
        for epoch, base_offset in batches:
            if epoch < 0:
                continue
            if entries and epoch < entries[-1].epoch:
                return False
            if not entries or epoch > entries[-1].epoch:
                entries.append(EpochEntry(epoch, base_offset))
        for entry in dropped:
            # Every kept or replayed entry starts below the log end, so only its epoch can
            # conflict.
            if entry.start_offset == log_end_offset and (
                not entries or entry.epoch > entries[-1].epoch
            ):
                entries.append(entry)
        if entries != self._entries:
            log.warning(
                "%s: leader epochs repaired from the batches from offset %d on: %s -> %s",
                self._name,
                from_offset,
                self._entries,
                entries,
            )
            self._entries = entries
        return True

    # -- queries ----------------------------------------------------------------------
    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def latest_epoch(self) -> int:
        """The epoch of the last entry (the epoch that appended last); UNDEFINED_EPOCH when
        no epoch appended anything yet."""
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, as Kafka answers it:

        - the latest epoch: the log end offset (it is still being appended to);
        - an older epoch: the start offset of the next higher epoch, with the largest
          epoch at or below the requested one (the requested one itself when it appended
          here, else the one before it: the follower then looks that epoch up in its own
          log and truncates to the smaller of the two ends);
        - an epoch below the first entry (retention removed its history): the requested
          epoch with the first entry's start offset, so a follower truncates no further
          than the leader's log start (Kafka since KIP-279; KIP-101 answered UNDEFINED);
        - UNDEFINED_EPOCH, an epoch above the latest, or an empty cache:
          (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET).
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1].epoch:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._entries, requested_epoch, key=_epoch)
        if higher == len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        end = self._entries[higher].start_offset
        if higher == 0:
            return requested_epoch, end
        return self._entries[higher - 1].epoch, end

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch that appended `offset`; UNDEFINED_EPOCH below the first entry."""
        at = bisect.bisect_right(self._entries, offset, key=_start_offset)
        return self._entries[at - 1].epoch if at else UNDEFINED_EPOCH

    @property
    def synced(self) -> bool:
        """Whether the file on disk holds the entries, durably."""
        return not self._dirty and not self._unsynced

    @property
    def dirty(self) -> bool:
        """Whether the entries changed since the file was last written."""
        return self._dirty

    # -- durability -------------------------------------------------------------------
    def write(self) -> bool:
        """Write the file (no fsync) if the entries changed since it was last written.
        Returns whether it did."""
        if not self._dirty:
            return False
        # No fsync: `sync` runs before the recovery point passes these entries and
        # recovery re-derives the rest (module doc).
        write_entry_lines(self.path, self._lines(), durable=False)
        self._dirty = False
        self._unsynced = True
        return True

    def sync(self, sync=None) -> bool:
        """Write the file if it is dirty, then fsync it if it is not durable yet. Returns
        whether it did: its rename is then durable only once the caller fsyncs the
        directory."""
        self.write()
        if not self._unsynced:
            return False
        fsync_file(self.path, sync)
        self._unsynced = False
        return True

    def save_durably(self) -> None:
        """Write the file with its fsyncs (and its directory's): at open, before the
        recovery point covers what recovery re-read."""
        write_entry_lines(self.path, self._lines(), durable=True)
        self._dirty = self._unsynced = False

    # -- changes ----------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` appended from `start_offset` on; marks the cache dirty when
        that changes anything. Returns whether it did.

        As Kafka (since 2.1): the same epoch again changes nothing unless it starts lower;
        otherwise the newest append wins: entries it conflicts with (an epoch at or above
        it, a start offset at or above its own) are removed from the end first. The log
        only appends at its end, so such entries describe offsets it no longer holds
        (an append that failed, a leadership that appended nothing, a log truncated to
        below them); a warning says when data's history goes with them. An epoch below
        the latest does not happen in a sane cluster (epochs never decrease and a
        follower truncates before it appends its new leader's batches)."""
        if self._assign(EpochEntry(epoch, start_offset)):
            self._changed()
            return True
        return False

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the entries starting at or after `end_offset`: the log was truncated there
        (a follower cutting its divergent tail, recovery cutting a torn one)."""
        keep = bisect.bisect_left(self._entries, end_offset, key=_start_offset)
        if keep < len(self._entries):
            removed = self._entries[keep:]
            del self._entries[keep:]
            log.info(
                "%s: leader epochs %s dropped (log cut at %d)", self._name, removed, end_offset
            )
            self._changed()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to `start_offset` (retention): entries wholly below it go
        and the epoch holding it now starts there."""
        covered = bisect.bisect_right(self._entries, start_offset, key=_start_offset)
        if covered == 0:
            return
        first = EpochEntry(self._entries[covered - 1].epoch, start_offset)
        if covered == 1 and self._entries[0] == first:
            return
        self._entries[:covered] = [first]
        self._changed()

    # -- internals --------------------------------------------------------------------
    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"{self._name}: invalid leader epoch entry {entry}")
        if self._entries:
            latest = self._entries[-1]
            if entry.epoch == latest.epoch and entry.start_offset >= latest.start_offset:
                return False
        removed = []
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch
            or self._entries[-1].start_offset >= entry.start_offset
        ):
            removed.append(self._entries.pop())
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            log.warning(
                "%s: leader epoch %s replaces conflicting entries %s",
                self._name,
                entry,
                removed[::-1],
            )
        self._entries.append(entry)
        return True

    def _add(self, entry: EpochEntry) -> None:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"negative leader epoch entry {entry}")
        if self._entries and (
            entry.epoch <= self._entries[-1].epoch
            or entry.start_offset <= self._entries[-1].start_offset
        ):
            raise ValueError(f"leader epoch entries do not increase at {entry}")
        self._entries.append(entry)

    def _lines(self) -> list[str]:
        return [f"{e.epoch} {e.start_offset}" for e in self._entries]

    def _changed(self) -> None:
        # The file is written later (`write`), or by `sync` (module doc).
        if not self._dirty:
            self._dirty = True
            self.on_dirty(self)

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self._name}, {self._entries})"


def _ignore(cache: LeaderEpochCache) -> None:
    pass


def _epoch(entry: EpochEntry) -> int:
    return entry.epoch


def _start_offset(entry: EpochEntry) -> int:
    return entry.start_offset
