"""The manifest of a committed run (docs/contracts/hdfs-load.md): offsets, counts, files, gaps.

``history/<run>/manifest.json`` is where the load keeps its offsets: the next run starts each
partition at the ``next`` of the newest *load* manifest. The JSON carries ``"version"``;
readers accept versions up to MANIFEST_VERSION and ignore fields they do not know, so a
field added without a version bump does not break older readers.

Ledger per partition: ``next - first = loaded + quarantined + skipped``, where skipped counts
offsets with no record (control records, compaction gaps) and, at read_committed, the
records of aborted transactions; ``markers`` and ``aborted`` say how many of the skipped
offsets were transaction markers and aborted records (neither loaded nor lost). A retention gap is separate: the
offsets ``[gap.from, gap.to)`` were deleted before anyone loaded them, and ``gap.to == first``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime

MANIFEST_VERSION = 1
KINDS = ("load", "rerun", "compact")


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Gap:
    """Offsets lost to retention: [from_offset, to_offset)."""

    from_offset: int
    to_offset: int

    @property
    def size(self) -> int:
        return self.to_offset - self.from_offset


@dataclass(frozen=True)
class DataFile:
    path: str  # final path, relative to the root
    records: int
    # The output partition the file is in, as its directory names it: dt= and hr=, hr
    # None for a daily partitioner (both None for a partitioner with other levels).
    dt: str | None
    hr: str | None
    bytes: int = 0


@dataclass(frozen=True)
class ErrorFile:
    path: str
    records: int
    bytes: int = 0


@dataclass(frozen=True)
class RangeCount:
    """The rows of one task range (``partition``, offsets ``[first, next)``) that a
    compacted file holds: ``records`` of them, all of one directory."""

    partition: int
    first: int
    next: int
    records: int


@dataclass(frozen=True)
class CompactedFile:
    """A file written by compaction (or by a rerun that took its range out of one): it
    holds the rows of ``inputs`` (files deleted in the same commit), which are exactly the
    rows of ``ranges``. docs/contracts/hdfs-load.md, "Compaction"."""

    path: str
    records: int
    dt: str | None
    hr: str | None
    bytes: int
    inputs: list[str]
    ranges: list[RangeCount]

    def problems(self) -> list[str]:
        if sum(r.records for r in self.ranges) != self.records:
            return [f"{self.path}: its ranges do not hold its {self.records} records"]
        return []


@dataclass
class PartitionLedger:
    topic: str
    partition: int
    first: int
    next: int
    loaded: int = 0
    quarantined: int = 0
    skipped: int = 0
    gap: Gap | None = None
    files: list[DataFile] = field(default_factory=list)
    error_files: list[ErrorFile] = field(default_factory=list)
    schema_ids: list[int] = field(default_factory=list)
    # Informational: the partition's leader when the run was planned, and the brokers its
    # records were read from, in turn (more than one: the leadership moved during the run).
    leader: int = -1
    read_from: list[int] = field(default_factory=list)
    # Of `skipped`: transaction markers, and records of aborted transactions (read_committed).
    markers: int = 0
    aborted: int = 0

    def balances(self) -> bool:
        return self.next - self.first == self.loaded + self.quarantined + self.skipped

    def problems(self) -> list[str]:
        me = f"{self.topic}[{self.partition}]"
        out = []
        if not self.balances():
            out.append(
                f"{me}: next - first = {self.next - self.first} but loaded + quarantined"
                f" + skipped = {self.loaded + self.quarantined + self.skipped}"
            )
        if min(self.loaded, self.quarantined, self.skipped, self.markers, self.aborted) < 0 or (
            self.next < self.first
        ):
            out.append(f"{me}: negative count or range")
        if self.markers + self.aborted > self.skipped:
            out.append(f"{me}: markers + aborted exceed the {self.skipped} skipped offsets")
        if sum(f.records for f in self.files) != self.loaded:
            out.append(f"{me}: files hold {sum(f.records for f in self.files)} != {self.loaded}")
        if sum(f.records for f in self.error_files) != self.quarantined:
            out.append(f"{me}: error files do not hold the {self.quarantined} quarantined")
        if self.gap is not None and not (self.gap.from_offset < self.gap.to_offset == self.first):
            out.append(f"{me}: gap {self.gap} does not end where the range starts ({self.first})")
        return out


@dataclass(frozen=True)
class WindowCount:
    """Records of one topic whose timestamp falls in [window_start_ms, + window_ms)."""

    topic: str
    window_start_ms: int
    loaded: int
    quarantined: int = 0
    aborted: int = 0  # records of aborted transactions, skipped (read_committed)


@dataclass
class Manifest:
    run_id: str
    kind: str  # "load" | "rerun"
    created_at: str  # ISO-8601 UTC
    window_ms: int
    partitions: list[PartitionLedger] = field(default_factory=list)
    windows: list[WindowCount] = field(default_factory=list)
    previous_run: str | None = None  # the committed run this one continued from
    replaces: str | None = None  # for a rerun: the run whose files it replaced
    version: int = MANIFEST_VERSION
    # Files that replaced others row for row (compaction; a rerun's rewrite of a compacted
    # file): which inputs became which output. A "compact" run has nothing else.
    compacted: list[CompactedFile] = field(default_factory=list)

    # checks

    def ledger_balances(self) -> bool:
        return all(p.balances() for p in self.partitions)

    def problems(self) -> list[str]:
        """Everything inconsistent in this manifest; the commit refuses a manifest with any."""
        out = []
        if self.kind not in KINDS:
            out.append(f"unknown kind {self.kind!r}")
        if (self.kind == "rerun") != (self.replaces is not None):
            out.append("a rerun names the run it replaces, and only a rerun does")
        if self.window_ms <= 0:
            out.append("window_ms must be positive")
        seen = set()
        for p in self.partitions:
            key = (p.topic, p.partition)
            if key in seen:
                out.append(f"{p.topic}[{p.partition}] appears twice")
            seen.add(key)
            out.extend(p.problems())
        paths = self.files()
        if len(paths) != len(set(paths)):
            out.append("a file is named twice")
        for w in self.windows:
            if w.window_start_ms % self.window_ms:
                out.append(f"window {w.window_start_ms} of {w.topic} is not aligned")
        if self.kind == "compact" and (self.partitions or self.windows):
            out.append("a compaction moves rows, it loads none: no partitions, no windows")
        inputs = [i for c in self.compacted for i in c.inputs]
        if len(inputs) != len(set(inputs)):
            out.append("a file is compacted into two outputs")
        for c in self.compacted:
            out.extend(c.problems())
        return out

    # views

    def next_offsets(self) -> dict[tuple[str, int], int]:
        return {(p.topic, p.partition): p.next for p in self.partitions}

    def files(self) -> list[str]:
        """Every final path the run commits: data files and quarantine files."""
        return [f.path for p in self.partitions for f in (*p.files, *p.error_files)] + [
            c.path for c in self.compacted
        ]

    def window_counts(self) -> dict[tuple[str, int], WindowCount]:
        return {(w.topic, w.window_start_ms): w for w in self.windows}

    # JSON

    def to_dict(self) -> dict:
        out = {
            "version": self.version,
            "run_id": self.run_id,
            "kind": self.kind,
            "created_at": self.created_at,
            "previous_run": self.previous_run,
            "replaces": self.replaces,
            "window_ms": self.window_ms,
            "partitions": [
                _partition_to_dict(p)
                for p in sorted(self.partitions, key=lambda p: (p.topic, p.partition))
            ],
            "windows": [
                {
                    "topic": w.topic,
                    "window_start_ms": w.window_start_ms,
                    "loaded": w.loaded,
                    "quarantined": w.quarantined,
                    "aborted": w.aborted,
                }
                for w in sorted(self.windows, key=lambda w: (w.topic, w.window_start_ms))
            ],
        }
        if self.compacted:  # absent otherwise: load manifests stay as they were
            out["compacted"] = [_compacted_to_dict(c) for c in self.compacted]
        return out

    def to_json(self) -> bytes:
        return (json.dumps(self.to_dict(), indent=1, sort_keys=False) + "\n").encode()

    @classmethod
    def from_dict(cls, d: dict) -> Manifest:
        version = d.get("version")
        if not isinstance(version, int) or not 1 <= version <= MANIFEST_VERSION:
            raise ValueError(f"manifest version {version!r} is not one this reader knows")
        return cls(
            run_id=d["run_id"],
            kind=d["kind"],
            created_at=d["created_at"],
            window_ms=d["window_ms"],
            partitions=[_partition_from_dict(p) for p in d.get("partitions", [])],
            windows=[
                WindowCount(
                    w["topic"],
                    w["window_start_ms"],
                    w["loaded"],
                    w.get("quarantined", 0),
                    w.get("aborted", 0),
                )
                for w in d.get("windows", [])
            ],
            previous_run=d.get("previous_run"),
            replaces=d.get("replaces"),
            version=version,
            compacted=[_compacted_from_dict(c) for c in d.get("compacted", [])],
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> Manifest:
        return cls.from_dict(json.loads(data))


def _partition_to_dict(p: PartitionLedger) -> dict:
    return {
        "topic": p.topic,
        "partition": p.partition,
        "first": p.first,
        "next": p.next,
        "loaded": p.loaded,
        "quarantined": p.quarantined,
        "skipped": p.skipped,
        "markers": p.markers,
        "aborted": p.aborted,
        "gap": None if p.gap is None else {"from": p.gap.from_offset, "to": p.gap.to_offset},
        "files": [
            {"path": f.path, "records": f.records, "dt": f.dt, "hr": f.hr, "bytes": f.bytes}
            for f in p.files
        ],
        "error_files": [
            {"path": f.path, "records": f.records, "bytes": f.bytes} for f in p.error_files
        ],
        "schema_ids": sorted(p.schema_ids),
        "leader": p.leader,
        "read_from": list(p.read_from),
    }


def _partition_from_dict(d: dict) -> PartitionLedger:
    gap = d.get("gap")
    return PartitionLedger(
        topic=d["topic"],
        partition=d["partition"],
        first=d["first"],
        next=d["next"],
        loaded=d.get("loaded", 0),
        quarantined=d.get("quarantined", 0),
        skipped=d.get("skipped", 0),
        markers=d.get("markers", 0),
        aborted=d.get("aborted", 0),
        gap=None if gap is None else Gap(gap["from"], gap["to"]),
        files=[
            DataFile(f["path"], f["records"], f["dt"], f["hr"], f.get("bytes", 0))
            for f in d.get("files", [])
        ],
        error_files=[
            ErrorFile(f["path"], f["records"], f.get("bytes", 0)) for f in d.get("error_files", [])
        ],
        schema_ids=list(d.get("schema_ids", [])),
        leader=d.get("leader", -1),
        read_from=list(d.get("read_from", [])),
    )


def _compacted_to_dict(c: CompactedFile) -> dict:
    return {
        "path": c.path,
        "records": c.records,
        "dt": c.dt,
        "hr": c.hr,
        "bytes": c.bytes,
        "inputs": list(c.inputs),
        "ranges": [
            {"partition": r.partition, "first": r.first, "next": r.next, "records": r.records}
            for r in c.ranges
        ],
    }


def _compacted_from_dict(d: dict) -> CompactedFile:
    return CompactedFile(
        d["path"],
        d["records"],
        d.get("dt"),
        d.get("hr"),
        d.get("bytes", 0),
        list(d.get("inputs", [])),
        [RangeCount(r["partition"], r["first"], r["next"], r["records"]) for r in d["ranges"]],
    )
