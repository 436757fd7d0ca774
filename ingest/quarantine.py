"""Quarantined records written to a file of their own, raw bytes kept.

Format: JSON lines, UTF-8, one object per record:

    {"topic": "page-views", "partition": 3, "offset": 1234,
     "key": "<base64 or null>", "value": "<base64 or null>",
     "reason": "unknown schema id 99", "schema_id": 99}

JSON lines rather than an Avro container because whoever opens this file is
debugging: ``head`` shows the reasons, any language reads it, Spark's JSON reader
loads it (``spark.read.json``), and no schema is needed to read bad data.
Key and value are base64 (standard alphabet, padded) because they are arbitrary
bytes; null stays null, so a tombstone is told apart from an empty value.
``schema_id`` is the id from the frame when the value had one, else null.

The file is opened through the same ``open_file(path) -> binary file`` callable
as the data files; records are written as they come, so memory stays bounded.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from ingest.decoders.base import Quarantined
from ingest.writers import CountingFile, WriteResult


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text, validate=True)


class QuarantineWriter:
    """Writes one quarantine file for one (topic, partition) of a run."""

    def __init__(self, file: BinaryIO, topic: str, partition: int) -> None:
        self.file = CountingFile(file)
        self.topic = topic
        self.partition = partition
        self.records = 0

    @classmethod
    def open(
        cls, open_file: Callable[[str], BinaryIO], path: str, topic: str, partition: int
    ) -> QuarantineWriter:
        return cls(open_file(path), topic, partition)

    def write(self, records: Iterable[Quarantined]) -> None:
        lines = []
        for q in records:
            entry = {
                "topic": self.topic,
                "partition": self.partition,
                "offset": q.offset,
                "key": _b64(q.key),
                "value": _b64(q.value),
                "reason": q.reason,
                "schema_id": q.schema_id,
            }
            lines.append(json.dumps(entry, separators=(",", ":")) + "\n")
        if lines:
            self.file.write("".join(lines).encode("utf-8"))
            self.records += len(lines)

    def close(self) -> WriteResult:
        self.file.close()
        return WriteResult(self.records, self.file.bytes)


def read_quarantine(lines: Iterable[bytes | str]) -> Iterator[tuple[str, int, Quarantined]]:
    """(topic, partition, record) of each line of a quarantine file."""
    for line in lines:
        if isinstance(line, bytes):
            line = line.decode("utf-8")
        if not line.strip():
            continue
        entry = json.loads(line)
        record = Quarantined(
            entry["offset"],
            _unb64(entry["key"]),
            _unb64(entry["value"]),
            entry["reason"],
            entry["schema_id"],
        )
        yield entry["topic"], entry["partition"], record
