"""Producer-state snapshot files of one partition directory: `<20-digit offset>.snapshot`,
the partition's producer state for the batches below that offset
(docs/contracts/log.md, "Producer-state snapshots").

The log knows only files and offsets; what the bytes mean is
broker/server/producer_state.py's (`encode_snapshot`, `decode_snapshot`). A snapshot is
written at each roll (the new segment's base offset) and at a clean stop (the log end),
so a start-up reads the log only from the newest snapshot on.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

from broker.util.files import write_atomically

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
# Snapshots kept per partition: the newest covers a restart, older ones a truncation
# below it (a follower cutting its tail, recovery cutting a torn one) without a rebuild
# from the log start.
KEEP_SNAPSHOTS = 3


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(directory: Path) -> list[int]:
    """The offsets of the snapshots in `directory`, ascending."""
    found = []
    for name in os.listdir(directory):
        stem, dot, suffix = name.partition(".")
        if dot and "." + suffix == SNAPSHOT_SUFFIX and stem.isdigit():
            found.append(int(stem))
    return sorted(found)


def write_snapshot(directory: Path, offset: int, data: bytes) -> None:
    """Write (or replace) the snapshot at `offset` and drop all but the newest
    KEEP_SNAPSHOTS. Not fsynced: a torn or lost file fails its CRC or is missing, and
    the reader falls back to an older one or the log (a process crash leaves it whole:
    rename)."""
    write_atomically(directory / snapshot_name(offset), data, durable=False)
    for old in snapshot_offsets(directory)[:-KEEP_SNAPSHOTS]:
        delete_snapshot(directory, old)


def delete_snapshot(directory: Path, offset: int) -> None:
    (directory / snapshot_name(offset)).unlink(missing_ok=True)


def delete_snapshots_outside(directory: Path, start: int, end: int) -> None:
    """Drop the snapshots below `start` (their segments went: the log can no longer be
    replayed from them) and above `end` (a truncation cut the batches they describe)."""
    for offset in snapshot_offsets(directory):
        if offset < start or offset > end:
            delete_snapshot(directory, offset)


def newest_snapshots(directory: Path, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) of the snapshots within [start, end], newest first; the reader
    stops at the first it can decode (and deletes those it cannot)."""
    for offset in reversed(snapshot_offsets(directory)):
        if start <= offset <= end:
            try:
                data = (directory / snapshot_name(offset)).read_bytes()
            except FileNotFoundError:
                continue
            yield offset, data
