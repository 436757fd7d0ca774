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

The file is rewritten (atomically, fsynced) at every change: a new epoch, a truncation.
That is rare (leader changes, follower truncation, retention) and never per batch. The
log assigns a new epoch before it writes the batches, so the file never misses an epoch
the log holds; entries it has beyond the log end after a crash are dropped at open.

One exception: the first version of the file of a log that has none and holds no batch
(a partition just created: its leader's first epoch) is written without fsyncs
(`first_write_durable=False`). A power failure then leaves no file, an unreadable one
(both rebuilt from the batches at open, exactly) or that first version whole, which is
right for every batch appended after it; every later version is fsynced before the
batches that need it, so an older version can never come back under newer batches.

Not thread-safe: the broker drives every log from its one event-loop thread.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from broker.log.checkpoint import CorruptCheckpoint, read_entry_lines, write_entry_lines

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
        first_write_durable: bool = True,
    ) -> None:
        self.path = Path(path)
        self._entries: list[EpochEntry] = []
        self._name = name or self.path.parent.name
        # False only while no version of the file was ever written (see the module doc).
        self._next_write_durable = first_write_durable
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
        cache._write()
        return cache

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

    # -- changes ----------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` appended from `start_offset` on; saves the file when that
        changes anything. Returns whether it did.

        As Kafka (since 2.1): the same epoch again changes nothing unless it starts lower;
        otherwise the newest append wins: entries it conflicts with (an epoch at or above
        it, a start offset at or above its own) are removed from the end first. The log
        only appends at its end, so such entries describe offsets it no longer holds
        (an append that failed, a leadership that appended nothing, a log truncated to
        below them); a warning says when data's history goes with them. An epoch below
        the latest does not happen in a sane cluster (epochs never decrease and a
        follower truncates before it appends its new leader's batches)."""
        if self._assign(EpochEntry(epoch, start_offset)):
            self._write()
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
            self._write()

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
        self._write()

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

    def _write(self) -> None:
        lines = (f"{e.epoch} {e.start_offset}" for e in self._entries)
        write_entry_lines(self.path, lines, durable=self._next_write_durable)
        self._next_write_durable = True

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self._name}, {self._entries})"


def _epoch(entry: EpochEntry) -> int:
    return entry.epoch


def _start_offset(entry: EpochEntry) -> int:
    return entry.start_offset
