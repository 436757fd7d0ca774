"""The load's Prometheus metrics, per run: computed from what the run already records (its
manifest, its tasks' results, its plan) and published once the run is committed.

Where they go (config group "metrics", docs/configuration.md):

- always ``history/<run>/metrics.prom`` next to the manifest (and ``audit.prom`` for the
  audit that follows), in the Prometheus text format;
- ``metrics.textfile.dir``: the node exporter's textfile collector directory, as
  ``kafka_hourly_load.prom`` / ``kafka_hourly_audit.prom`` (replaced atomically);
- ``metrics.pushgateway.url``: a Pushgateway, job ``metrics.pushgateway.job``, grouped by
  ``step`` (load, audit), so each step replaces only its own series.

A failure to publish is logged and loses nothing: the run is committed before.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest, write_to_textfile
from prometheus_client.exposition import push_to_gateway

from broker.util.clock import SECOND_MS
from ingest import layout
from ingest.fs import FileSystem
from ingest.manifest import Manifest
from ingest.plan import PartitionRange
from ingest.task import TaskResult

log = logging.getLogger(__name__)

LOAD_FILE = "metrics.prom"
AUDIT_FILE = "audit.prom"
TEXTFILE_NAMES = {"load": "kafka_hourly_load.prom", "audit": "kafka_hourly_audit.prom"}


# The run's per-topic series: key -> (name, help).
PER_TOPIC = {
    "records": ("ingest_run_records", "Records loaded (committed)."),
    "written": ("ingest_run_written_bytes", "Bytes of the data files committed."),
    "read": ("ingest_run_read_bytes", "Record bytes the tasks read from Kafka."),
    "quarantined": ("ingest_run_quarantined_records", "Records quarantined."),
    "skipped": (
        "ingest_run_skipped_offsets",
        "Offsets with no record (control records, compaction).",
    ),
    "gaps": ("ingest_run_gap_offsets", "Offsets lost to retention before they were loaded."),
    "tasks": ("ingest_run_tasks", "Tasks of the run."),
    "task_seconds": ("ingest_run_task_seconds_total", "Task run time, summed."),
    "task_max": ("ingest_run_task_seconds_max", "The longest task's run time."),
    "decode_rate": (
        "ingest_run_decode_records_per_second",
        "Records read (loaded and quarantined) per second of task time.",
    ),
    "lag_start": (
        "ingest_lag_start_offsets",
        "Offsets behind the high watermark when the run was planned.",
    ),
    "lag_end": ("ingest_lag_end_offsets", "Offsets behind the high watermark after the commit."),
}


def _gauge(registry: CollectorRegistry, name: str, documentation: str, labels=()) -> Gauge:
    return Gauge(name, documentation, list(labels), registry=registry)


def run_metrics(
    manifest: Manifest,
    results: Iterable[TaskResult],
    ranges: Iterable[PartitionRange],
    end_watermarks: dict[tuple[str, int], int],
) -> CollectorRegistry:
    """One committed load run's metrics. Counts are the manifest's (what was committed);
    task durations and bytes read are the tasks' results; the lag at the start is the
    plan's (high watermark at planning minus the stored offset), at the end the high
    watermarks read after the commit minus the committed offsets."""
    registry = CollectorRegistry()
    g = {key: _gauge(registry, name, doc, ["topic"]) for key, (name, doc) in PER_TOPIC.items()}
    records, written, read = g["records"], g["written"], g["read"]
    quarantined, skipped, gaps = g["quarantined"], g["skipped"], g["gaps"]
    tasks, task_seconds, task_max = g["tasks"], g["task_seconds"], g["task_max"]
    decode_rate, lag_start, lag_end = g["decode_rate"], g["lag_start"], g["lag_end"]
    committed_at = _gauge(
        registry,
        "ingest_last_committed_run_timestamp_seconds",
        "When the last load run was committed (its manifest's time), Unix seconds.",
        ["run"],
    )
    for p in manifest.partitions:
        records.labels(p.topic).inc(p.loaded)
        written.labels(p.topic).inc(sum(f.bytes for f in p.files))
        quarantined.labels(p.topic).inc(p.quarantined)
        skipped.labels(p.topic).inc(p.skipped)
        gaps.labels(p.topic).inc(p.gap.size if p.gap else 0)
        end = end_watermarks.get((p.topic, p.partition))
        if end is not None:
            lag_end.labels(p.topic).inc(max(end - p.next, 0))
    for r in ranges:
        lag_start.labels(r.topic).inc(max(r.latest - r.first, 0))
    timing: dict[str, list[float]] = defaultdict(list)
    decoded: dict[str, int] = defaultdict(int)
    for result in results:
        tasks.labels(result.topic).inc()
        read.labels(result.topic).inc(result.bytes_read)
        timing[result.topic].append(result.seconds)
        decoded[result.topic] += result.loaded + result.quarantined
    for topic, seconds in timing.items():
        task_seconds.labels(topic).set(sum(seconds))
        task_max.labels(topic).set(max(seconds))
        decode_rate.labels(topic).set(decoded[topic] / sum(seconds) if sum(seconds) else 0.0)
    committed_at.labels(manifest.run_id).set(_iso_seconds(manifest.created_at))
    return registry


def audit_metrics(report, fs: FileSystem, topics: Iterable[str]) -> CollectorRegistry:
    """The audit's verdict: periods complete and incomplete per topic in this audit (it
    judges only those without a _SUCCESS yet), and the newest complete hour of each of
    `topics` (its _SUCCESS marker, whichever audit wrote it)."""
    registry = CollectorRegistry()
    hours = _gauge(
        registry,
        "ingest_audit_hours",
        "Periods this audit judged, by verdict (complete: _SUCCESS written).",
        ["topic", "verdict"],
    )
    last = _gauge(
        registry,
        "ingest_last_complete_hour_timestamp_seconds",
        "Start of the newest complete (audited, _SUCCESS) hour of a topic, Unix seconds.",
        ["topic"],
    )
    topics = set(topics) | {h.topic for h in report.hours}
    for topic in topics:  # zero is a verdict too: nothing left incomplete
        hours.labels(topic, "complete")
        hours.labels(topic, "incomplete")
    for h in report.hours:
        hours.labels(h.topic, "complete" if h.complete else "incomplete").inc()
    for topic in sorted(topics):
        newest = newest_complete_hour(fs, topic)
        if newest is not None:
            last.labels(topic).set(newest.start_ms / SECOND_MS)
    return registry


def newest_complete_hour(fs: FileSystem, topic: str) -> layout.Hour | None:
    """The newest ``dt=/hr=`` directory of the topic holding a _SUCCESS, walking the
    newest days first (a day's hours are few; it stops at the first found)."""
    for day in reversed(fs.list(layout.topic_dir(topic))):
        name = day.path.rsplit("/", 1)[-1]
        if not (day.is_dir and name.startswith("dt=")):
            continue
        for hour in reversed(fs.list(day.path)):
            hr = hour.path.rsplit("/", 1)[-1]
            if hour.is_dir and hr.startswith("hr="):
                key = layout.Hour(name[3:], hr[3:])
                if fs.exists(layout.success_marker(topic, key)):
                    return key
    return None


def publish(
    config: dict[str, Any], fs: FileSystem, run_id: str, step: str, registry: CollectorRegistry
) -> list[str]:
    """Write `registry` next to the run's manifest and wherever the config says; returns
    where it went. `step` is "load" or "audit"."""
    text = generate_latest(registry)
    path = f"{layout.history_dir(run_id)}/{LOAD_FILE if step == 'load' else AUDIT_FILE}"
    fs.write_bytes(path, text)
    written = [fs.uri(path)]
    directory = config["metrics.textfile.dir"]
    if directory:
        target = Path(directory) / TEXTFILE_NAMES[step]
        try:
            os.makedirs(directory, exist_ok=True)
            write_to_textfile(str(target), registry)
            written.append(str(target))
        except OSError as exc:
            log.error("could not write the %s metrics to %s: %s", step, target, exc)
    gateway = config["metrics.pushgateway.url"]
    if gateway:
        try:
            push_to_gateway(
                gateway,
                job=config["metrics.pushgateway.job"],
                registry=registry,
                grouping_key={"step": step},
                timeout=10,
            )
            written.append(gateway)
        except OSError as exc:
            log.error("could not push the %s metrics to %s: %s", step, gateway, exc)
    return written


def _iso_seconds(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
