"""Kafka's offset checkpoint files: `recovery-point-offset-checkpoint`,
`replication-offset-checkpoint` (high watermarks) and `log-start-offset-checkpoint`.

Format: a version line `0`, a count line, then one `topic partition offset` line per
partition. Written atomically (`broker.util.files.write_atomically`), so a crash leaves
either the old or the new file.
"""

from __future__ import annotations

from pathlib import Path

from broker.util.files import write_atomically

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
VERSION = 0


class CorruptCheckpoint(ValueError):
    pass


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """The offsets in `path`; empty if the file does not exist."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
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
    offsets: dict[tuple[str, int], int] = {}
    for line in entries:
        # Topic names cannot contain spaces, so the last two fields are numbers.
        fields = line.rsplit(" ", 2)
        try:
            topic, partition, offset = fields[0], int(fields[1]), int(fields[2])
        except (IndexError, ValueError):
            raise CorruptCheckpoint(f"{path}: malformed line {line!r}") from None
        offsets[(topic, partition)] = offset
    return offsets


def write_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    lines = [str(VERSION), str(len(offsets))]
    lines += [
        f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())
    ]
    write_atomically(path, "\n".join(lines) + "\n")
