"""One map task of the load: one (topic, partition) range, executor side.

It pulls [start, end) through the fetch API, decodes with the topic's decoder, splits
rows by its partitioner (event hour by default) and streams them with its record
writer into files under the run's staging area (the plug-ins: ingest/plugins.py); nothing
it writes is visible to users until the driver commits the run. Each attempt stages
under its own directory, so a retried attempt never mixes with a dead one's files.
What it returns is its ledger: offsets read, records loaded, quarantined and skipped
(of which aborted transactions' records and transaction markers, counted apart), counts
per audit window, and the staged files with their final names.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from broker.client.security import SecurityConfig
from broker.client.simple_consumer import SimpleConsumer
from ingest import layout
from ingest.columns import SCHEMA_ID
from ingest.fs import filesystem_for
from ingest.partitioner import window_counts
from ingest.plan import TaskSpec
from ingest.plugins import TopicContext, TopicPlugins
from ingest.quarantine import QuarantineWriter
from ingest.range_reader import RangeReader
from ingest.schema_pins import PinnedRegistry, SchemaPins
from ingest.writers import PartitionedWriters
from schemas.client import RegistrySettings
from schemas.windows import DEFAULT_AUDIT_WINDOW_MS, window_start

# Fault injection for the crash and cluster tests: a directory holding trigger files.
# `kill-task-once`: the first task attempt to claim it (by renaming it away) dies after its
# first chunk, as an executor lost mid-range would; Spark then retries the task.
# `pause-task-once`: the first task attempt to claim it, after its first chunk, writes
# `task-paused` (JSON: topic, partition, the planned leader, the brokers read from so far, pid)
# and waits until that file is gone, so that a test can kill or stop the leader mid-range.
FAULTS_ENV = "INGEST_TEST_FAULTS"
_PAUSE_MAX_S = 300.0


def _claim(faults: str, trigger: str, claimed: str) -> bool:
    try:
        os.rename(os.path.join(faults, trigger), os.path.join(faults, claimed))
    except FileNotFoundError:
        return False
    return True


def _fault_point(spec: TaskSpec, reader: RangeReader) -> None:
    faults = os.environ.get(FAULTS_ENV)
    if not faults:
        return
    if _claim(faults, "kill-task-once", "task-killed"):
        os._exit(1)
    if _claim(faults, "pause-task-once", "pause-claimed"):
        paused = os.path.join(faults, "task-paused")
        state = {
            "topic": spec.topic,
            "partition": spec.partition,
            "leader": spec.leader,
            "read_from": reader.read_from,
            "position": reader.position,
            "end": spec.end,
            "pid": os.getpid(),  # the Python worker: a test may kill its executor
        }
        with open(paused + ".tmp", "w") as f:
            json.dump(state, f)
        os.rename(paused + ".tmp", paused)
        deadline = time.monotonic() + _PAUSE_MAX_S
        while os.path.exists(paused) and time.monotonic() < deadline:
            time.sleep(0.05)


@dataclass(frozen=True)
class TaskSettings:
    """Everything a task needs, picklable: shipped to executors with the task."""

    run_id: str
    bootstrap_servers: tuple[str, ...]
    registry: RegistrySettings
    root: str
    security: SecurityConfig | None = None  # TLS/SASL to the brokers (conf: kafka.*)
    plugins: TopicPlugins = TopicPlugins()
    time_field: str = "header.time"
    window_ms: int = DEFAULT_AUDIT_WINDOW_MS
    fetch_bytes: int = 8 << 20
    max_bytes: int | None = None
    webhdfs_user: str | None = None
    webhdfs_kerberos: bool = False
    root_filesystem: str = "auto"  # ingest.fs.filesystem_for's `via`
    # When the ranges were first loaded (the ingestion-time partitioner's hour): the
    # run's start, or for a rerun the start of the run it replaces. None: the run's.
    ingest_time_ms: int | None = None
    # Each decoded topic's target schema, as the driver found it when it planned.
    schemas: SchemaPins = SchemaPins()
    # kafka.isolation.level: read_committed skips aborted transactions' records
    isolation_level: str = "read_committed"

    def context(self, topic: str, registry: PinnedRegistry | None) -> TopicContext:
        ingested = self.ingest_time_ms
        if ingested is None:
            ingested = layout.run_start_ms(self.run_id)
        return TopicContext(topic, registry, self.time_field, ingested)


@dataclass(frozen=True)
class StagedFile:
    staged: str
    final: str
    records: int
    bytes: int
    dt: str | None = None  # the output partition's dt= and hr=, where it has them
    hr: str | None = None


@dataclass
class TaskResult:
    topic: str
    partition: int
    start: int
    end: int  # the offset after the last one read: below the planned end if stopped early
    planned_end: int
    attempt: int
    loaded: int = 0
    quarantined: int = 0
    skipped: int = 0
    bytes_read: int = 0
    files: list[StagedFile] = field(default_factory=list)
    error_files: list[StagedFile] = field(default_factory=list)
    # audit window start (ms, by Kafka timestamp) -> records, of all records read
    windows: dict[int, int] = field(default_factory=dict)
    quarantined_windows: dict[int, int] = field(default_factory=dict)
    schema_ids: list[int] = field(default_factory=list)
    read_from: list[int] = field(default_factory=list)  # brokers that served the reads, in turn
    # Part of `skipped`: records of aborted transactions (read_committed), and markers.
    aborted: int = 0
    markers: int = 0
    aborted_windows: dict[int, int] = field(default_factory=dict)  # of the aborted records
    seconds: float = 0.0  # the task's run time (the load's metrics)

    @property
    def balances(self) -> bool:
        return self.end - self.start == self.loaded + self.quarantined + self.skipped


def staging_dir(run_id: str, spec: TaskSpec, attempt: int) -> str:
    return (
        f"{layout.staging_dir(run_id)}/{spec.topic}+{spec.partition}+{spec.start}/attempt-{attempt}"
    )


def run_task(spec: TaskSpec, settings: TaskSettings, attempt: int = 0) -> TaskResult:
    fs = filesystem_for(
        settings.root,
        user=settings.webhdfs_user,
        kerberos=settings.webhdfs_kerberos,
        via=settings.root_filesystem,
    )
    registry = PinnedRegistry(settings.registry, settings.schemas)
    consumer = SimpleConsumer(
        list(settings.bootstrap_servers),
        client_id=f"ingest-{settings.run_id}",
        security=settings.security,
        isolation_level=settings.isolation_level,
    )
    started = time.monotonic()
    try:
        result = _run(spec, settings, attempt, fs, registry, consumer)
    finally:
        consumer.close()
        registry.close()
    result.seconds = time.monotonic() - started
    return result


def _run(spec, settings, attempt, fs, registry, consumer) -> TaskResult:
    result = TaskResult(spec.topic, spec.partition, spec.start, spec.start, spec.end, attempt)
    stage = staging_dir(settings.run_id, spec, attempt)
    context = settings.context(spec.topic, registry)
    decoder = settings.plugins.decoder(context)
    writer = settings.plugins.writer(spec.topic)
    ext = writer.extension
    writers = PartitionedWriters(
        fs.open_write,
        lambda key: f"{stage}/{layout.key_dirs(key)}.{ext}",
        lambda f: writer.for_decoder(f, decoder),
        settings.plugins.partitioner(context),
    )
    quarantine: QuarantineWriter | None = None
    reader = RangeReader(
        consumer,
        spec.topic,
        spec.partition,
        spec.start,
        spec.end,
        fetch_bytes=settings.fetch_bytes,
        max_bytes=settings.max_bytes,
    )
    windows: Counter[int] = Counter()
    bad_windows: Counter[int] = Counter()
    schema_ids: set[int] = set()
    window_ms = settings.window_ms
    try:
        for records in reader.chunks():
            chunk = decoder.decode(spec.partition, records)
            if chunk.batch.num_rows:
                # Audit windows of decoded rows on the whole batch (Arrow), not per record.
                windows.update(window_counts(chunk.batch, window_ms))
                writers.write(chunk.batch)
                if SCHEMA_ID.name in chunk.batch.schema.names:
                    schema_ids.update(chunk.batch.column(SCHEMA_ID.name).unique().to_pylist())
            if chunk.quarantined:
                if quarantine is None:
                    quarantine = QuarantineWriter.open(
                        fs.open_write, f"{stage}/errors.jsonl", spec.topic, spec.partition
                    )
                quarantine.write(chunk.quarantined)
                bad = pa.array([q.offset for q in chunk.quarantined], pa.int64())
                stamps = records.timestamp.take(pc.index_in(bad, records.offset))
                for stamp in stamps.to_pylist():
                    window = window_start(stamp, window_ms)
                    bad_windows[window] += 1
                    windows[window] += 1
                result.quarantined += len(chunk.quarantined)
            result.loaded += chunk.batch.num_rows
            _fault_point(spec, reader)
    finally:
        closed = writers.close()
        errors = quarantine.close() if quarantine is not None else None
    result.end = reader.position
    result.skipped = reader.skipped
    result.bytes_read = reader.bytes_read
    result.read_from = reader.read_from
    result.aborted, result.markers = reader.aborted, reader.markers
    for stamps in reader.aborted_timestamps:
        starts = pc.value_counts(window_start(stamps, window_ms))
        for window, n in zip(
            starts.field("values").to_pylist(), starts.field("counts").to_pylist(), strict=True
        ):
            result.aborted_windows[window] = result.aborted_windows.get(window, 0) + n
    result.windows = dict(windows)
    result.quarantined_windows = dict(bad_windows)
    result.schema_ids = sorted(i for i in schema_ids if i is not None)
    for key, (staged, written) in closed.items():
        final = layout.data_file(
            spec.topic, key, spec.partition, result.start, result.end, settings.run_id, ext
        )
        result.files.append(
            StagedFile(
                staged,
                final,
                written.records,
                written.bytes,
                getattr(key, "dt", None),
                getattr(key, "hr", None),
            )
        )
    if errors is not None:
        final = layout.errors_file(
            spec.topic, settings.run_id, spec.partition, result.start, result.end, "jsonl"
        )
        result.error_files.append(
            StagedFile(f"{stage}/errors.jsonl", final, errors.records, errors.bytes)
        )
    return result
