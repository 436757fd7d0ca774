"""Hour compaction: a finalized directory's small files merged into files of about
``compaction.target.file.bytes``, committed like a load (docs/contracts/hdfs-load.md,
"Compaction").

A compaction is a run of kind ``compact``: under the run lock, after ``recover()``, it
plans per directory (``plan_directory``, pure), writes each output under its own staging
(on Spark executors, or in process), and commits through ``ingest.commit.commit``: the
intent deletes the inputs and the directory's ``_SUCCESS``, moves the outputs in, then
writes ``_SUCCESS`` back (same counts, plus a note). So a crash before the commit point
leaves the inputs untouched, and after it the next ``recover()`` finishes the swap; a
reader never sees an input and an output of one compaction side by side.

Rows are copied, never decoded into other types: Parquet batches as they are (row groups
regrouped to about ROW_GROUP_BYTES), Avro container blocks decompressed and
concatenated. Only files of one schema (and codec) share an output, so a directory
holding two schema versions keeps one output per version.

Provenance: every output is a ``CompactedFile`` of the manifest, naming its inputs and
the task ranges (partition, [first, next), records) whose rows it holds. A rerun finds
its rows through those ranges (``rerun_rewrites``) and rewrites the output without them.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fastavro.write import Writer as AvroContainerWriter

from broker.util.clock import HOUR_MS
from ingest import columns, layout
from ingest.commit import RunLock, commit, list_runs, load_manifest, recover
from ingest.fs import FileSystem, filesystem_for
from ingest.manifest import CompactedFile, Manifest, RangeCount, utc_now_iso
from ingest.writers import CountingFile

log = logging.getLogger(__name__)

# Arrow bytes buffered per Parquet row group of an output: large enough for long column
# chunks (what scans want), small enough for an executor's memory.
ROW_GROUP_BYTES = 64 << 20
MAX_ROW_GROUP_ROWS = 1 << 20
AVRO_BLOCK_BYTES = 1 << 20  # uncompressed bytes per Avro block, the load's sync_interval
COMPACTED = "compacted"


class CompactionError(Exception):
    """A directory's files do not match what the manifests say; nothing was changed."""


# ---------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class Source:
    """One live data file of a directory, as the manifests describe it."""

    path: str
    bytes: int
    records: int
    ranges: tuple[RangeCount, ...]
    group: str = ""  # the schema (and codec): only files of one group share an output


@dataclass(frozen=True)
class OutputPlan:
    topic: str
    directory: str
    dt: str | None
    hr: str | None
    path: str  # final
    inputs: tuple[Source, ...]

    @property
    def records(self) -> int:
        return sum(s.records for s in self.inputs)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.inputs)


def compacted_name(directory: str, topic: str, index: int, run_id: str, ext: str) -> str:
    """``<topic>+compacted+<index>+<run>.<ext>``: unique per run and directory; the run's
    manifest says which ranges the file holds."""
    return f"{directory}/{topic}+{COMPACTED}+{index}+{run_id}.{ext}"


def plan_directory(
    topic: str,
    directory: str,
    sources: Iterable[Source],
    target_bytes: int,
    run_id: str,
    dt: str | None = None,
    hr: str | None = None,
    first_index: int = 0,
) -> list[OutputPlan]:
    """Which files go into which output: per group, first fit by decreasing size into
    bins of at most ``target_bytes`` (a file at or above it stays alone). A bin of one
    file is left as it is. First fit leaves no two bins that would fit in one, so planning
    a directory again right after finds nothing to do."""
    groups: dict[str, list[Source]] = defaultdict(list)
    for s in sources:
        groups[s.group].append(s)
    out: list[OutputPlan] = []
    index = first_index
    for group in sorted(groups):
        bins: list[list[Source]] = []
        sizes: list[int] = []
        for s in sorted(groups[group], key=lambda s: (-s.bytes, s.path)):
            for i, size in enumerate(sizes):
                if size + s.bytes <= target_bytes:
                    bins[i].append(s)
                    sizes[i] += s.bytes
                    break
            else:
                bins.append([s])
                sizes.append(s.bytes)
        for b in bins:
            if len(b) < 2:
                continue
            ext = b[0].path.rsplit(".", 1)[-1]
            inputs = tuple(sorted(b, key=lambda s: s.path))
            path = compacted_name(directory, topic, index, run_id, ext)
            out.append(OutputPlan(topic, directory, dt, hr, path, inputs))
            index += 1
    return out


# ---------------------------------------------------------------------------- what is there


@dataclass
class _History:
    """Committed manifests by run id, read once each."""

    fs: FileSystem
    cache: dict[str, Manifest] = field(default_factory=dict)
    runs: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.runs = set(list_runs(self.fs))

    def manifest(self, run: str) -> Manifest:
        if run not in self.cache:
            self.cache[run] = load_manifest(self.fs, run)
        return self.cache[run]


def _name_parts(path: str) -> tuple[list[str], str]:
    stem, _, ext = path.rsplit("/", 1)[-1].rpartition(".")
    return stem.split("+"), ext  # topic names never hold "+" (Kafka's rule)


def is_compacted(path: str) -> bool:
    parts, _ = _name_parts(path)
    return len(parts) == 4 and parts[1] == COMPACTED


def describe(history: _History, path: str, size: int) -> Source:
    """What the manifests say ``path`` holds; CompactionError for a file no committed run
    wrote (the load never touches what it did not write)."""
    parts, _ = _name_parts(path)
    run = parts[-1]
    if not layout.is_run_id(run) or run not in history.runs:
        raise CompactionError(f"{path} was written by no committed run")
    m = history.manifest(run)
    if is_compacted(path):
        for c in m.compacted:
            if c.path == path:
                return Source(path, size, c.records, tuple(c.ranges))
    else:
        name = layout.parse_data_file(path)
        for p in m.partitions:
            for f in p.files:
                if f.path == path:
                    rng = RangeCount(name.partition, name.first, name.next, f.records)
                    return Source(path, size, f.records, (rng,))
    raise CompactionError(f"{path} is not in the manifest of {run}")


def _schema_group(fs: FileSystem, path: str) -> str:
    """The schema (and Avro codec) of a file, read from its footer or header."""
    data = fs.read_bytes(path)
    if path.endswith(".parquet"):
        return "parquet:" + pq.read_schema(pa.BufferReader(data)).remove_metadata().to_string()
    reader = fastavro.block_reader(io.BytesIO(data))
    return f"avro:{reader.codec}:{reader.metadata['avro.schema']}"


def data_files(fs: FileSystem, directory: str) -> list:
    """The directory's data files (what a query reads: no ``_`` or ``.`` names)."""
    return [
        st
        for st in fs.list(directory)
        if not st.is_dir and not st.path.rsplit("/", 1)[-1].startswith(("_", "."))
    ]


def finalized_directories(fs: FileSystem, topic: str) -> list[tuple[str, str, str | None]]:
    """(directory, dt, hr) of every directory of ``topic`` that has ``_SUCCESS``."""
    out = []
    for day in fs.list(layout.topic_dir(topic)):
        name = day.path.rsplit("/", 1)[-1]
        if not day.is_dir or not name.startswith("dt="):
            continue
        dt = name[3:]
        if fs.exists(f"{day.path}/{layout.SUCCESS}"):
            out.append((day.path, dt, None))
        for hour in fs.list(day.path):
            hname = hour.path.rsplit("/", 1)[-1]
            if hour.is_dir and hname.startswith("hr="):
                if fs.exists(f"{hour.path}/{layout.SUCCESS}"):
                    out.append((hour.path, dt, hname[3:]))
    return out


def _period(dt: str, hr: str | None) -> tuple[int, int]:
    if hr is None:
        start = layout.Day(dt).start_ms
        return start, start + 24 * HOUR_MS
    start = layout.Hour(dt, hr).start_ms
    return start, start + HOUR_MS


def topics_under(fs: FileSystem) -> list[str]:
    return sorted(st.path.rsplit("/", 1)[-1] for st in fs.list(layout.DATA) if st.is_dir)


def select(topics: Iterable[str], patterns: Iterable[str]) -> list[str]:
    regexes = [re.compile(p) for p in patterns]
    return sorted(t for t in topics if any(r.fullmatch(t) for r in regexes))


def plan_root(
    fs: FileSystem,
    topics: Iterable[str],
    target_bytes: int,
    run_id: str,
    start_ms: int | None = None,
    end_ms: int | None = None,
) -> tuple[list[OutputPlan], list[str]]:
    """Outputs for every finalized directory of ``topics`` whose period lies in [start,
    end), and the directories skipped with the reason (files no manifest names)."""
    history = _History(fs)
    plans: list[OutputPlan] = []
    skipped: list[str] = []
    for topic in topics:
        for directory, dt, hr in finalized_directories(fs, topic):
            first, last = _period(dt, hr)
            if (start_ms is not None and last <= start_ms) or (
                end_ms is not None and first >= end_ms
            ):
                continue
            files = data_files(fs, directory)
            if len(files) < 2:
                continue
            try:
                sources = [describe(history, st.path, st.size) for st in files]
            except CompactionError as exc:
                skipped.append(f"{directory}: {exc}")
                continue
            small = [s for s in sources if s.bytes < target_bytes]
            if len(small) < 2:
                continue
            sources = [Source(**{**s.__dict__, "group": _schema_group(fs, s.path)}) for s in small]
            plans.extend(plan_directory(topic, directory, sources, target_bytes, run_id, dt, hr))
    return plans, skipped


# ---------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class RootSettings:
    """What an executor needs to reach the root itself (as a load task does)."""

    root: str
    webhdfs_user: str | None = None
    webhdfs_kerberos: bool = False
    root_filesystem: str = "auto"

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> RootSettings:
        return cls(
            config["root"],
            config["webhdfs.user"] or None,
            config["webhdfs.kerberos"],
            config["root.filesystem"],
        )

    def open(self) -> FileSystem:
        return filesystem_for(
            self.root,
            user=self.webhdfs_user,
            kerberos=self.webhdfs_kerberos,
            via=self.root_filesystem,
        )


@dataclass(frozen=True)
class Written:
    path: str  # final
    staged: str
    records: int
    bytes: int
    seconds: float = 0.0


def _drop_mask(batch: pa.RecordBatch, drop: list[tuple[int, int, int]]) -> pa.Array:
    partition, offset = batch.column(columns.PARTITION.name), batch.column(columns.OFFSET.name)
    mask = pa.array([False] * batch.num_rows)
    for p, first, next_ in drop:
        hit = pc.and_(
            pc.equal(partition, p),
            pc.and_(pc.greater_equal(offset, first), pc.less(offset, next_)),
        )
        mask = pc.or_(mask, hit)
    return mask


def _write_parquet(fs, inputs: list[str], staged: str, drop) -> tuple[int, int]:
    files = [pq.ParquetFile(pa.BufferReader(fs.read_bytes(p))) for p in inputs]
    meta = [f.metadata for f in files]
    rows = sum(m.num_rows for m in meta) or 1
    raw = sum(m.row_group(i).total_byte_size for m in meta for i in range(m.num_row_groups))
    group_rows = max(1, min(MAX_ROW_GROUP_ROWS, ROW_GROUP_BYTES * rows // max(raw, 1)))
    schema = files[0].schema_arrow
    compression = meta[0].row_group(0).column(0).compression if meta[0].num_row_groups else None
    out = CountingFile(fs.open_write(staged))
    writer = pq.ParquetWriter(out, schema, compression=(compression or "snappy").lower())
    pending: list[pa.RecordBatch] = []
    pending_rows = written = 0
    for f in files:
        for batch in f.iter_batches(batch_size=65_536):
            if drop:
                batch = batch.filter(pc.invert(_drop_mask(batch, drop)))
            pending.append(batch)
            pending_rows += batch.num_rows
            written += batch.num_rows
            while pending_rows >= group_rows:  # full row groups only, the rest waits
                table = pa.Table.from_batches(pending, schema)
                writer.write_table(table.slice(0, group_rows), row_group_size=group_rows)
                pending = table.slice(group_rows).to_batches()
                pending_rows -= group_rows
    if pending_rows:
        writer.write_table(pa.Table.from_batches(pending, schema), row_group_size=group_rows)
    writer.close()
    out.close()
    return written, out.bytes


def _write_avro(fs, inputs: list[str], staged: str, drop) -> tuple[int, int]:
    out = CountingFile(fs.open_write(staged))
    writer = None
    pending: list[bytes] = []
    pending_rows = pending_bytes = written = 0

    def flush():
        nonlocal pending, pending_rows, pending_bytes
        if pending_rows:
            writer.write_block(_Block(pending_rows, io.BytesIO(b"".join(pending))))
        pending, pending_rows, pending_bytes = [], 0, 0

    for path in inputs:
        data = io.BytesIO(fs.read_bytes(path))
        blocks = fastavro.block_reader(data)
        if writer is None:
            schema = fastavro.parse_schema(json.loads(blocks.metadata["avro.schema"]))
            writer = AvroContainerWriter(out, schema, codec=blocks.codec)
        if drop:  # a rerun's rewrite: rows decoded to filter them (rare, small)
            data.seek(0)
            for record in fastavro.reader(data):
                p, o = record[columns.PARTITION.name], record[columns.OFFSET.name]
                if not any(p == q and a <= o < b for q, a, b in drop):
                    writer.write(record)
                    written += 1
            writer.flush()
            continue
        for block in blocks:  # the encoded rows, concatenated into larger blocks
            body = block.bytes_.getvalue()
            pending.append(body)
            pending_rows += block.num_records
            pending_bytes += len(body)
            written += block.num_records
            if pending_bytes >= AVRO_BLOCK_BYTES:
                flush()
    flush()
    writer.flush()
    out.close()
    return written, out.bytes


class _Block:
    """What fastavro's ``Writer.write_block`` reads of a block (ingest/writers.py too)."""

    def __init__(self, num_records: int, bytes_: io.BytesIO) -> None:
        self.num_records, self.bytes_ = num_records, bytes_


def write_output(
    fs: FileSystem,
    inputs: list[str],
    staged: str,
    final: str,
    expected: int,
    drop: list[tuple[int, int, int]] | None = None,
) -> Written:
    """Copy the rows of ``inputs`` (less those of the ``drop`` ranges: (partition, first,
    next)) into ``staged``; CompactionError unless exactly ``expected`` rows were written."""
    started = time.process_time()
    write = _write_parquet if final.endswith(".parquet") else _write_avro
    records, size = write(fs, inputs, staged, drop or [])
    if records != expected:
        raise CompactionError(f"{final}: wrote {records} rows, the manifests say {expected}")
    return Written(final, staged, records, size, time.process_time() - started)


def _run_plan(root: RootSettings, run_id: str, index: int, plan: OutputPlan, attempt: int):
    fs = root.open()
    name = plan.path.rsplit("/", 1)[-1]
    staged = f"{layout.staging_dir(run_id)}/{COMPACTED}-{index}/attempt-{attempt}/{name}"
    return write_output(fs, [s.path for s in plan.inputs], staged, plan.path, plan.records)


def _on_executor(root: RootSettings, run_id: str):
    def run(items):
        from pyspark import TaskContext

        attempt = TaskContext.get().attemptNumber()
        for index, plan in items:
            yield _run_plan(root, run_id, index, plan, attempt)

    return run


def run_plans(spark, root: RootSettings, run_id: str, plans: list[OutputPlan]) -> list[Written]:
    """One Spark task per output (in process without a session)."""
    if spark is None:
        return [_run_plan(root, run_id, i, p, 0) for i, p in enumerate(plans)]
    from ingest.fs.hadoop import CONF_PROPERTY, spark_hadoop_conf

    sc = spark.sparkContext
    sc.setJobGroup(f"compact-{run_id}", f"compact {run_id}: {len(plans)} outputs")
    sc.setLocalProperty(CONF_PROPERTY, json.dumps(spark_hadoop_conf(spark)))
    items = list(enumerate(plans))
    return sc.parallelize(items, len(items)).mapPartitions(_on_executor(root, run_id)).collect()


# ---------------------------------------------------------------------------- the run


@dataclass
class CompactResult:
    run_id: str | None
    plans: list[OutputPlan]
    skipped: list[str]
    written: list[Written] = field(default_factory=list)
    manifest: Manifest | None = None

    def text(self) -> str:
        lines = []
        verb = "compacted" if self.manifest else "would compact"
        for p in self.plans:
            lines.append(
                f"{verb} {p.directory}: {len(p.inputs)} files, {p.records:,} rows, "
                f"{p.bytes:,} bytes -> {p.path.rsplit('/', 1)[-1]}"
            )
        for s in self.skipped:
            lines.append(f"skipped {s}")
        if not self.plans:
            lines.append("nothing to compact")
        elif self.manifest:
            lines.append(f"run {self.run_id}: {len(self.plans)} outputs committed")
        return "\n".join(lines)


def _success_note(fs: FileSystem, marker: str, run_id: str, plans: list[OutputPlan]) -> bytes:
    """The directory's ``_SUCCESS`` as it was (the same counts), with a note of this
    compaction appended when it is the audit's JSON report."""
    data = fs.read_bytes(marker)
    try:
        report = json.loads(data)
    except ValueError:
        return data
    if not isinstance(report, dict):
        return data
    notes = list(report.get("compactions", []))
    notes.append(
        {
            "run_id": run_id,
            "inputs": sum(len(p.inputs) for p in plans),
            "outputs": len(plans),
            "records": sum(p.records for p in plans),
        }
    )
    return json.dumps({**report, "compactions": notes}, indent=1).encode()


def build_commit(fs: FileSystem, run_id: str, window_ms: int, plans, written):
    """The compaction's manifest, moves, deletions and ``_SUCCESS`` writes."""
    by_final = {w.path: w for w in written}
    manifest = Manifest(run_id, "compact", utc_now_iso(), window_ms)
    moves, deletes, writes = [], [], {}
    per_dir: dict[str, list[OutputPlan]] = defaultdict(list)
    for p in plans:
        w = by_final[p.path]
        ranges = sorted(
            (r for s in p.inputs for r in s.ranges), key=lambda r: (r.partition, r.first)
        )
        manifest.compacted.append(
            CompactedFile(
                p.path, w.records, p.dt, p.hr, w.bytes, [s.path for s in p.inputs], ranges
            )
        )
        moves.append((w.staged, p.path))
        deletes.extend(s.path for s in p.inputs)
        per_dir[p.directory].append(p)
    for directory, dir_plans in per_dir.items():
        marker = f"{directory}/{layout.SUCCESS}"
        if fs.exists(marker):
            writes[marker] = _success_note(fs, marker, run_id, dir_plans)
            deletes.append(marker)
    return manifest, moves, deletes, writes


def compact(
    config: dict[str, Any],
    *,
    topics: list[str] | None = None,
    start_ms: int | None = None,
    end_ms: int | None = None,
    dry_run: bool = False,
    spark=None,
) -> CompactResult:
    """Compact the finalized directories of ``topics`` (default: those matching
    ``compaction.topics``) whose period lies in [start_ms, end_ms) (default: the last
    ``compaction.lookback.hours``)."""
    from ingest.job import CRASH_ENV, _crash_point, _CrashAfterRenames, open_root

    fs = open_root(config, spark)
    existing = topics_under(fs)
    chosen = topics if topics is not None else select(existing, config["compaction.topics"])
    unknown = [f"{t}: no {layout.topic_dir(t)} under the root" for t in chosen if t not in existing]
    chosen = [t for t in chosen if t in existing]
    if start_ms is None and end_ms is None and config["compaction.lookback.hours"] > 0:
        now = int(time.time() * 1000)
        start_ms = now - now % HOUR_MS - config["compaction.lookback.hours"] * HOUR_MS
    target = config["compaction.target.file.bytes"]
    if dry_run:
        plans, skipped = plan_root(fs, chosen, target, "<run>", start_ms, end_ms)
        return CompactResult(None, plans, unknown + skipped)
    with RunLock(fs, ttl_s=config["lock.stale.ms"] / 1000) as lock:
        recover(fs, lock)
        runs = list_runs(fs)
        run_id = layout.new_run_id(after=runs[-1] if runs else None)
        plans, skipped = plan_root(fs, chosen, target, run_id, start_ms, end_ms)
        result = CompactResult(run_id, plans, unknown + skipped)
        if not plans:
            return result
        result.written = run_plans(spark, RootSettings.from_config(config), run_id, plans)
        manifest, moves, deletes, writes = build_commit(
            fs, run_id, config["audit.window.ms"], plans, result.written
        )
        _crash_point("compact-before-commit")
        commit(
            _CrashAfterRenames(fs) if os.environ.get(CRASH_ENV) else fs,
            manifest,
            moves,
            replaces=deletes,
            lock=lock,
            writes=writes,
        )
        result.manifest = manifest
        return result


# ---------------------------------------------------------------------------- reruns


def rerun_rewrites(
    fs: FileSystem, holder: Manifest, run_id: str
) -> tuple[list[tuple[str, str]], list[str], list[CompactedFile]]:
    """What a rerun of ``holder`` must also do where compaction merged its files: every
    compacted file holding rows of its ranges is deleted and, when it holds other rows
    too, written again without them (staged under the rerun's run). Returns the moves,
    the deletions and the manifest entries. CompactionError when some of the holder's
    rows are neither in its own files nor in a compacted file (nothing is guessed)."""
    ranges: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for p in holder.partitions:
        ranges[p.topic].append((p.partition, p.first, p.next))
    history = _History(fs)
    expected: dict[str, int] = defaultdict(int)  # per directory: the holder's rows there
    present: dict[str, int] = defaultdict(int)
    for p in holder.partitions:
        for f in p.files:
            directory = f.path.rsplit("/", 1)[0]
            expected[directory] += f.records
            if fs.status(f.path) is not None:
                present[directory] += f.records
    moves, deletes, entries = [], [], []
    for directory in sorted(expected):
        found = present[directory]
        topic_ranges = ranges[directory.split("/")[1]]  # data/<topic>/...
        index = 0
        for st in data_files(fs, directory):
            if not is_compacted(st.path):
                continue
            src = describe(history, st.path, st.size)
            mine = [r for r in src.ranges if _within(r, topic_ranges)]
            if not mine:
                continue
            found += sum(r.records for r in mine)
            deletes.append(st.path)
            keep = [r for r in src.ranges if not _within(r, topic_ranges)]
            if not keep:
                continue
            topic, ext = _name_parts(st.path)[0][0], st.path.rsplit(".", 1)[-1]
            final = compacted_name(directory, topic, index, run_id, ext)
            index += 1
            staged = f"{layout.staging_dir(run_id)}/{COMPACTED}/{final.replace('/', '+')}"
            drop = [(r.partition, r.first, r.next) for r in mine]
            w = write_output(fs, [st.path], staged, final, sum(r.records for r in keep), drop)
            moves.append((staged, final))
            dt, hr = _levels(directory)
            entries.append(CompactedFile(final, w.records, dt, hr, w.bytes, [st.path], keep))
        if found != expected[directory]:
            raise CompactionError(
                f"{directory}: {holder.run_id} wrote {expected[directory]} rows there, "
                f"{found} are in its files and compacted files; the rerun would not replace "
                "them exactly"
            )
    return moves, deletes, entries


def _within(r: RangeCount, ranges: list[tuple[int, int, int]]) -> bool:
    """A task range lies inside one of a run's (partition, first, next) ranges of the
    same topic. Live files' ranges never overlap, so inside means "that run's rows"."""
    return any(r.partition == q and a <= r.first and r.next <= b for q, a, b in ranges)


def _levels(directory: str) -> tuple[str | None, str | None]:
    dt = hr = None
    for part in directory.split("/"):
        if part.startswith("dt="):
            dt = part[3:]
        elif part.startswith("hr="):
            hr = part[3:]
    return dt, hr


__all__ = [
    "CompactResult",
    "CompactionError",
    "OutputPlan",
    "Source",
    "compact",
    "plan_directory",
    "rerun_rewrites",
]
