"""Swapping a cleaned segment into a log so that no crash loses or duplicates a record
(Kafka's `.cleaned` -> `.swap` -> live sequence), and finishing an interrupted swap when
the log is opened.

The cleaner writes the segment that replaces a run of consecutive old segments (a
"group") as `<base>.log.cleaned`, `<base>.index.cleaned`, `<base>.timeindex.cleaned`,
fsynced, where `<base>` is the group's first base offset. The cleaned segment always
ends at the offset its group ended at (the cleaner keeps the group's last batch, emptied
if none of its records survive), so its own offsets say which old segments it replaces:
those whose base offset lies in [its base offset, its next offset). Nothing else needs
to be written down for a crash to be repaired.

`swap_steps` does one file operation per step:

  1. `.index.cleaned`, `.timeindex.cleaned` -> `.swap`
  2. `.log.cleaned` -> `.log.swap`, fsync of the directory: the commit point
  3. each file of each old segment -> `*.deleted` (their fds stay open, so reads in
     flight finish; the log unlinks them after file.delete.delay.ms)
  4. `.index.swap`, `.timeindex.swap` -> live names
  5. `.log.swap` -> live name, fsync of the directory

`complete_swaps`, run by Log.open before anything else, decides from the files alone:

- a `*.cleaned` file: the swap had not committed and every old segment is intact:
  delete it;
- a `*.log.swap` file: the swap committed: walk it (CRC-checked, indexes rebuilt), delete
  the live segments whose base offsets it covers, and give it its live name;
- an index `*.swap` file: delete it (the index is rebuilt from its log);
- `*.deleted` files (old segments of a swap, or retention's) go in Log.open's cleaning.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

from broker.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SUFFIXES,
    SWAP_SUFFIX,
    LogSegment,
    parse_segment_name,
    segment_name,
)
from broker.util.files import fsync_dir

log = logging.getLogger(__name__)


def swap_steps(new: LogSegment, old: list[LogSegment]) -> Iterator[str]:
    """Swap `new` (files named `.cleaned`, written and fsynced) in for the segments
    `old`, one file operation per step; each step yields what it did. Tests stop
    between steps to leave the files as a crash would."""
    if new.suffix != CLEANED_SUFFIX:
        raise ValueError(f"{new} is not a cleaned segment")
    log_file, *index_files = new.paths()
    for path in index_files:
        os.rename(path, _with_suffix(path, SWAP_SUFFIX))
        yield f"renamed {path.name} to .swap"
    os.rename(log_file, _with_suffix(log_file, SWAP_SUFFIX))
    fsync_dir(new.dir)
    new.set_suffix(SWAP_SUFFIX)
    yield f"renamed {log_file.name} to .swap (committed)"
    for segment in old:
        for path in segment.paths():
            try:
                os.rename(path, path.with_name(path.name + DELETED_SUFFIX))
            except FileNotFoundError:  # an index never written
                continue
            yield f"renamed {path.name} to .deleted"
    log_file, *index_files = new.paths()
    for path in index_files:
        os.rename(path, _with_suffix(path, ""))
        yield f"renamed {path.name} to its live name"
    os.rename(log_file, _with_suffix(log_file, ""))
    fsync_dir(new.dir)
    new.set_suffix("")
    yield f"renamed {log_file.name} to its live name"


def _with_suffix(path: Path, suffix: str) -> Path:
    """`path` with its swap suffix (if any) replaced by `suffix`."""
    name = path.name
    for old in (CLEANED_SUFFIX, SWAP_SUFFIX):
        if name.endswith(old):
            name = name[: -len(old)]
            break
    return path.with_name(name + suffix)


def complete_swaps(directory: Path, index_interval: int) -> None:
    """Repair what an interrupted swap left in `directory` (see the module doc)."""
    names = os.listdir(directory)
    swapped: list[int] = []
    changed = False
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            log.info("deleting %s/%s: its swap did not commit", directory.name, name)
            (directory / name).unlink(missing_ok=True)
            changed = True
        elif name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            base = parse_segment_name(name[: -len(SWAP_SUFFIX)])
            if base is not None:
                swapped.append(base)
        elif name.endswith(SWAP_SUFFIX):
            (directory / name).unlink(missing_ok=True)
            changed = True
    live = sorted(b for b in map(parse_segment_name, names) if b is not None)
    for base in sorted(swapped):
        _finish_swap(directory, base, live, index_interval)
        changed = True
    if changed:
        fsync_dir(directory)


def _finish_swap(directory: Path, base: int, live: list[int], index_interval: int) -> None:
    segment = LogSegment.open(directory, base, index_interval, suffix=SWAP_SUFFIX)
    try:
        segment.recover()
        end = segment.next_offset
        if segment.size == 0 or end <= base:
            # Never written so (a cleaned segment keeps its group's last batch); keeping
            # the old segments is the choice that cannot lose a record.
            log.warning("%s is empty: keeping the segments it was to replace", segment.log_path)
            for path in segment.paths():
                path.unlink(missing_ok=True)
            return
        replaced = [b for b in live if base <= b < end]
        log.info(
            "completing the swap of %s: replacing segments %s",
            segment.log_path.name,
            [segment_name(b) for b in replaced],
        )
        for old in replaced:
            for kind in SUFFIXES:
                (directory / (segment_name(old) + kind)).unlink(missing_ok=True)
        segment.flush()
        log_file, *index_files = segment.paths()
        for path in (*index_files, log_file):
            os.rename(path, _with_suffix(path, ""))
    finally:
        segment.close()
