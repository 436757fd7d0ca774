"""The load, driver side: plan, run the map tasks on Spark, commit data and offsets as one.

`run_load` is the hourly job; `rerun` re-reads the exact offset ranges of stored runs and
replaces their files under the same commit protocol (docs/contracts/hdfs-load.md).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.client.admin import AdminClient
from broker.client.simple_consumer import SimpleConsumer
from broker.util.clock import SECOND_MS
from ingest import audit, layout, metrics, warehouse
from ingest.commit import (
    Recovery,
    RunLock,
    commit,
    last_committed_manifest,
    list_runs,
    load_manifest,
    recover,
    rerun_target,
)
from ingest.compact import rerun_rewrites
from ingest.config import kafka_security
from ingest.fs import FileSystem, filesystem_for
from ingest.manifest import (
    DataFile,
    ErrorFile,
    Gap,
    Manifest,
    PartitionLedger,
    WindowCount,
    utc_now_iso,
)
from ingest.plan import (
    PartitionRange,
    current_leader,
    plan_ranges,
    select_topics,
    split_tasks,
)
from ingest.plugins import TopicPlugins
from ingest.schema_pins import SchemaPins
from ingest.spark_runner import run_tasks, spark_session
from ingest.task import TaskResult, TaskSettings
from schemas.client import RegistrySettings

log = logging.getLogger(__name__)

# Crash tests kill the driver at a named point (SIGKILL: no cleanup, like a lost host).
CRASH_ENV = "INGEST_CRASH_AT"


def _crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        log.error("%s=%s: killing the driver here", CRASH_ENV, name)
        os.kill(os.getpid(), signal.SIGKILL)


class _CrashAfterRenames:
    """With INGEST_CRASH_AT=mid-moves: the filesystem, killing the driver at the second
    rename after the commit point (the intent's rename is the first), i.e. between moves."""

    def __init__(self, fs: FileSystem) -> None:
        self._fs = fs
        self._renames = 0

    def __getattr__(self, name: str):
        return getattr(self._fs, name)

    def rename_if_absent(self, src: str, dst: str) -> bool:
        self._renames += 1
        if self._renames == 3:
            _crash_point("mid-moves")
        return self._fs.rename_if_absent(src, dst)


@dataclass
class LoadResult:
    run_id: str | None
    manifest: Manifest | None
    recovered: Recovery
    results: list[TaskResult] = field(default_factory=list)


def open_root(config: dict[str, Any], spark=None) -> FileSystem:
    return filesystem_for(
        config["root"],
        spark,
        user=config["webhdfs.user"] or None,
        kerberos=config["webhdfs.kerberos"],
        via=config["root.filesystem"],
    )


def _settings(config: dict[str, Any], run_id: str, topics: Iterable[str]) -> TaskSettings:
    """The tasks' settings, with the target schemas of `topics` pinned as of now (one
    registry question per topic: ingest/schema_pins.py)."""
    registry = RegistrySettings.from_config(config)
    plugins = TopicPlugins.from_config(config)
    subjects = plugins.registry_subjects(topics)
    pins = SchemaPins()
    if subjects:
        with registry.client() as client:
            pins = SchemaPins.resolve(client, subjects)
    return TaskSettings(
        run_id=run_id,
        bootstrap_servers=tuple(config["bootstrap.servers"]),
        security=kafka_security(config),
        registry=registry,
        schemas=pins,
        root=config["root"],
        plugins=plugins,
        time_field=config["time.field"],
        window_ms=config["audit.window.ms"],
        fetch_bytes=config["fetch.max.bytes"],
        max_bytes=config["limits.max.bytes.per.partition"],
        webhdfs_user=config["webhdfs.user"] or None,
        webhdfs_kerberos=config["webhdfs.kerberos"],
        root_filesystem=config["root.filesystem"],
        isolation_level=config["kafka.isolation.level"],
    )


class _Session:
    """The caller's Spark session, or one of our own that we stop afterwards."""

    def __init__(self, config: dict[str, Any], spark) -> None:
        self.owned = spark is None
        self.spark = spark or spark_session(config["spark.master"], config["spark.app.name"])

    def __enter__(self):
        return self.spark

    def __exit__(self, *exc) -> None:
        if self.owned:
            self.spark.stop()


def run_load(config: dict[str, Any], *, spark=None, show_progress: bool = True) -> LoadResult:
    """One hourly load: every selected partition from its stored offset to the high
    watermark (within the per-run limits), committed atomically with its offsets."""
    with _Session(config, spark) as session:
        fs = open_root(config, session)
        with RunLock(fs, ttl_s=config["lock.stale.ms"] / SECOND_MS) as lock:
            recovered = recover(fs, lock)
            previous = last_committed_manifest(fs, kind="load")
            stored = previous.next_offsets() if previous else {}
            committed = list_runs(fs)
            run_id = layout.new_run_id(after=committed[-1] if committed else None)
            with AdminClient(config["bootstrap.servers"], security=kafka_security(config)) as admin:
                topics = select_topics(
                    admin.list_topics(), config["topics.whitelist"], config["topics.blacklist"]
                )
            with SimpleConsumer(
                config["bootstrap.servers"],
                security=kafka_security(config),
                # read_committed: ranges end at the last stable offset (plan.py)
                isolation_level=config["kafka.isolation.level"],
            ) as consumer:
                ranges = plan_ranges(
                    consumer,
                    topics,
                    stored,
                    new_partition_start=config["offsets.new.partition.start"],
                    on_gap=config["offsets.on.gap"],
                    max_records_per_partition=config["limits.max.records.per.partition"],
                )
            tasks = split_tasks(ranges, config["limits.max.records.per.task"])
            log.info(
                "run %s: %d partitions, %d offsets in %d tasks",
                run_id,
                len(ranges),
                sum(r.size for r in ranges),
                len(tasks),
            )
            results = run_tasks(
                session, tasks, _settings(config, run_id, {r.topic for r in ranges}), show_progress
            )
            manifest, moves = build_manifest(
                run_id,
                "load",
                ranges,
                results,
                config["audit.window.ms"],
                previous_run=previous.run_id if previous else None,
            )
            # Offsets of partitions not planned this run (topic no longer selected) carry forward.
            planned = {(r.topic, r.partition) for r in ranges}
            for (topic, partition), offset in sorted(stored.items()):
                if (topic, partition) not in planned:
                    manifest.partitions.append(PartitionLedger(topic, partition, offset, offset))
            # Late data: the _SUCCESS of a finalized period this run adds records to goes
            # in the same commit, before the files arrive (docs/contracts/audit.md).
            stale = audit.stale_markers(config, fs, manifest)
            _crash_point("before-commit")
            commit(
                _CrashAfterRenames(fs) if os.environ.get(CRASH_ENV) else fs,
                manifest,
                moves,
                replaces=stale,
                lock=lock,
            )
            _follow_files(config, fs, manifest.run_id, stale)
            _publish_metrics(config, fs, manifest, results, ranges)
    return LoadResult(run_id, manifest, recovered, results)


def _follow_files(config, fs: FileSystem, run_id: str, withdrawn: list[str]) -> None:
    """Queue the registered directories whose files this run changed, so their table
    follows the new files' schema at the next registration (the CLI's right after the
    run, the DAG's register task) even if the audit does not finalize them again."""
    if withdrawn:
        log.info("run %s: _SUCCESS withdrawn from %d period(s)", run_id, len(withdrawn))
        warehouse.enqueue(config, fs, withdrawn)


def _publish_metrics(config, fs, manifest, results, ranges) -> None:
    """The committed run's metrics (ingest/metrics.py), with the high watermarks now for
    the lag at the end; a failure here is logged: the run is committed already."""
    try:
        with SimpleConsumer(
            config["bootstrap.servers"], security=kafka_security(config)
        ) as consumer:
            ends = {
                (r.topic, r.partition): consumer.latest_offset(r.topic, r.partition) for r in ranges
            }
        registry = metrics.run_metrics(manifest, results, ranges, ends)
        where = metrics.publish(config, fs, manifest.run_id, "load", registry)
        log.info("run %s: metrics in %s", manifest.run_id, ", ".join(where))
    except Exception:
        log.exception("run %s: committed, but its metrics were not published", manifest.run_id)


def build_manifest(
    run_id: str,
    kind: str,
    ranges: list[PartitionRange],
    results: list[TaskResult],
    window_ms: int,
    previous_run: str | None = None,
    replaces: str | None = None,
) -> tuple[Manifest, list[tuple[str, str]]]:
    """The manifest and the file moves of a run from its tasks' ledgers.

    A partition's range ends where its tasks stop being contiguous: a task that stopped
    early (its byte budget) ends the range there, and later tasks of the same partition
    are left in staging (discarded); the next run loads from where this one stopped.
    """
    by_partition: dict[tuple[str, int], list[TaskResult]] = defaultdict(list)
    for r in results:
        by_partition[(r.topic, r.partition)].append(r)
    manifest = Manifest(
        run_id, kind, utc_now_iso(), window_ms, previous_run=previous_run, replaces=replaces
    )
    moves: list[tuple[str, str]] = []
    windows: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0, 0])
    for rng in ranges:
        ledger = PartitionLedger(
            rng.topic,
            rng.partition,
            rng.first,
            rng.first,
            gap=Gap(*rng.gap) if rng.gap else None,
            leader=rng.leader,
        )
        schema_ids: set[int] = set()
        for result in sorted(by_partition[(rng.topic, rng.partition)], key=lambda r: r.start):
            if result.start != ledger.next:
                break  # after an early stop: not contiguous, not committed
            ledger.next = result.end
            ledger.loaded += result.loaded
            ledger.quarantined += result.quarantined
            ledger.skipped += result.skipped
            ledger.markers += result.markers
            ledger.aborted += result.aborted
            schema_ids.update(result.schema_ids)
            for broker in result.read_from:
                if not ledger.read_from or ledger.read_from[-1] != broker:
                    ledger.read_from.append(broker)
            for f in result.files:
                ledger.files.append(DataFile(f.final, f.records, f.dt, f.hr, f.bytes))
                moves.append((f.staged, f.final))
            for f in result.error_files:
                ledger.error_files.append(ErrorFile(f.final, f.records, f.bytes))
                moves.append((f.staged, f.final))
            for window, count in result.windows.items():
                bad = result.quarantined_windows.get(window, 0)
                windows[(rng.topic, window)][0] += count - bad
                windows[(rng.topic, window)][1] += bad
            for window, count in result.aborted_windows.items():
                windows[(rng.topic, window)][2] += count
            if result.end < result.planned_end:
                break
        ledger.schema_ids = sorted(schema_ids)
        manifest.partitions.append(ledger)
    manifest.windows = [WindowCount(t, w, *counts) for (t, w), counts in sorted(windows.items())]
    return manifest, moves


def rerun(
    config: dict[str, Any],
    *,
    run_id: str | None = None,
    ranges: list[tuple[str, int, int, int]] | None = None,
    time_range: tuple[int, int] | None = None,
    spark=None,
    show_progress: bool = True,
) -> list[LoadResult]:
    """Re-read stored runs and replace their files. Name one run (`run_id`), or explicit
    per-partition offset ranges [(topic, partition, first, next)], or an event-time range
    [start_ms, end_ms): then every stored run whose ranges overlap it is rerun whole, since
    a rerun replaces exactly a stored run's files and offsets never move."""
    with _Session(config, spark) as session:
        fs = open_root(config, session)
        with RunLock(fs, ttl_s=config["lock.stale.ms"] / SECOND_MS) as lock:
            recovered = recover(fs, lock)
            targets = _rerun_targets(config, fs, run_id, ranges, time_range)
            done = []
            for target in targets:
                holder, replaced_paths = rerun_target(fs, target)
                new_run = layout.new_run_id(after=list_runs(fs)[-1])
                with SimpleConsumer(
                    config["bootstrap.servers"], security=kafka_security(config)
                ) as consumer:
                    plan = [
                        PartitionRange(
                            p.topic,
                            p.partition,
                            p.first,
                            p.next,
                            p.first,
                            p.next,
                            (p.gap.from_offset, p.gap.to_offset) if p.gap else None,
                            current_leader(consumer, p.topic, p.partition),
                        )
                        for p in holder.partitions
                    ]
                tasks = split_tasks(plan, config["limits.max.records.per.task"])
                settings = _settings(config, new_run, {r.topic for r in plan})
                # A rerun must cover the stored ranges exactly: no byte budget. Its
                # records keep the ingestion time of the load that first committed them,
                # so an ingestion-time partitioner puts them back where they were.
                settings = dataclasses.replace(
                    settings,
                    max_bytes=None,
                    ingest_time_ms=layout.run_start_ms(_first_load(fs, holder)),
                )
                results = run_tasks(session, tasks, settings, show_progress)
                manifest, moves = build_manifest(
                    new_run,
                    "rerun",
                    plan,
                    results,
                    config["audit.window.ms"],
                    previous_run=holder.previous_run,
                    replaces=holder.run_id,
                )
                # Rows of the holder that compaction merged with others' (ingest/compact.py).
                extra_moves, extra_deletes, rewritten = rerun_rewrites(fs, holder, new_run)
                manifest.compacted = rewritten
                commit(
                    fs,
                    manifest,
                    [*moves, *extra_moves],
                    replaces=[*replaced_paths, *extra_deletes],
                    lock=lock,
                )
                _follow_files(
                    config, fs, new_run, [p for p in replaced_paths if p.endswith(layout.SUCCESS)]
                )
                done.append(LoadResult(new_run, manifest, recovered, results))
            return done


def _first_load(fs: FileSystem, manifest: Manifest) -> str:
    """The load run whose ranges a (chain of) rerun(s) re-reads."""
    while manifest.replaces is not None:
        manifest = load_manifest(fs, manifest.replaces)
    return manifest.run_id


def _rerun_targets(config, fs: FileSystem, run_id, ranges, time_range) -> list[str]:
    """Stored runs (by the id they were first committed under) to rerun."""
    if sum(x is not None for x in (run_id, ranges, time_range)) != 1:
        raise ValueError("name exactly one of: a run id, offset ranges, a time range")
    runs = list_runs(fs)
    manifests = {r: load_manifest(fs, r) for r in runs}
    replaced = {m.replaces for m in manifests.values() if m.replaces}
    if run_id is not None:
        if run_id not in manifests:
            raise ValueError(f"no committed run {run_id} under {config['root']}")
        return [run_id]
    if time_range is not None:
        start_ms, end_ms = time_range
        with SimpleConsumer(
            config["bootstrap.servers"], security=kafka_security(config)
        ) as consumer:
            ranges = []
            partitions = {(p.topic, p.partition) for m in manifests.values() for p in m.partitions}
            for topic, partition in sorted(partitions):
                first = consumer.offsets_before(topic, partition, start_ms)
                last = consumer.offsets_before(topic, partition, end_ms)
                if first < 0:
                    continue
                ranges.append((topic, partition, first, last if last >= 0 else 2**63 - 1))
    wanted = []
    for run, m in manifests.items():
        current = run not in replaced
        overlaps = any(
            p.topic == t and p.partition == q and p.first < nxt and first < p.next
            for p in m.partitions
            for (t, q, first, nxt) in ranges
        )
        if current and overlaps:
            # Name the run by its original id: rerun_target follows the replacement chain.
            original = m.replaces or run
            while original in manifests and manifests[original].replaces:
                original = manifests[original].replaces
            wanted.append(original)
    return sorted(set(wanted))
