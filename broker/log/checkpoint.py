"""Kafka's checkpoint files: the offset checkpoints of a log dir
(`recovery-point-offset-checkpoint`, `replication-offset-checkpoint` for high watermarks,
`log-start-offset-checkpoint`, `cleaner-offset-checkpoint`) and each partition's
`leader-epoch-checkpoint`.

Format: a version line `0`, a count line, then one entry per line: `topic partition
offset` in the offset checkpoints, `epoch start_offset` in the leader epoch file. Written
atomically (`broker.util.files.write_atomically`), so a crash leaves either the old or the
new file; the leader epoch file without fsyncs (`durable=False`, see leader_epoch.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from broker.util.files import write_atomically

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
# Per log dir: each compacted partition's first dirty offset (cleaner.py).
CLEANER_OFFSET_FILE = "cleaner-offset-checkpoint"
VERSION = 0


class CorruptCheckpoint(ValueError):
    pass


def read_entry_lines(path: Path) -> list[str] | None:
    """The entry lines of the checkpoint at `path` (version and count checked); None if
    the file does not exist."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise CorruptCheckpoint(f"{path}: not text") from None
    lines = text.splitlines()
    try:
        version, count = int(lines[0]), int(lines[1])
    except (IndexError, ValueError):
        raise CorruptCheckpoint(f"{path}: missing version or count line") from None
    if version != VERSION:
        raise CorruptCheckpoint(f"{path}: unknown checkpoint version {version}")
    entries = lines[2:]
    if len(entries) != count:
        raise CorruptCheckpoint(f"{path}: expected {count} entries, found {len(entries)}")
    return entries


def write_entry_lines(path: Path, entries: Iterable[str], durable: bool = True) -> None:
    """Replace the checkpoint at `path`; `durable=False`: without fsyncs (see
    `write_atomically`), for a file its reader rebuilds when it is missing or corrupt."""
    entries = list(entries)
    text = "\n".join([str(VERSION), str(len(entries)), *entries]) + "\n"
    write_atomically(path, text, durable=durable)


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """The offsets in `path`; empty if the file does not exist."""
    offsets: dict[tuple[str, int], int] = {}
    for line in read_entry_lines(path) or []:
        # Topic names cannot contain spaces, so the last two fields are numbers.
        fields = line.rsplit(" ", 2)
        try:
            topic, partition, offset = fields[0], int(fields[1]), int(fields[2])
        except (IndexError, ValueError):
            raise CorruptCheckpoint(f"{path}: malformed line {line!r}") from None
        offsets[(topic, partition)] = offset
    return offsets


def write_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    write_entry_lines(
        path,
        (f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())),
    )
