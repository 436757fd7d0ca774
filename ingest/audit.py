"""The audit: producers' counts against what the load committed, per audit window and
per topic-period; `_SUCCESS` for the periods proven complete.

Producers publish, per (topic, window, host), how many records they sent (events are
additive). The load's manifests hold, per (topic, window), how many records it
committed: loaded into data files or quarantined (docs/contracts/audit.md). Both sides count by the record's
Kafka timestamp (schemas/windows.py), so they count the same thing, whatever the
topic's decoder (a raw or JSON topic is counted like an Avro one) or partitioner.

A period is what one output directory holds, so that its `_SUCCESS` means "this
directory is complete": an hour for the event-hour partitioner, a day for event-day.
An ingestion-time partitioner's directories are not event time, so its topics are
audited per event hour and the verdict goes to `data/<topic>/_audit/dt=/hr=/_SUCCESS`
(layout.audit_marker), not into a data directory. A period is complete when every
window of it is (accounted >= threshold x produced, and never more than produced: more
would be duplicates) and every partition of the topic has been loaded past its end.
Records of aborted transactions, which the load skips at read_committed, are accounted
as aborted: producers counted them when their delivery succeeded, so they are neither
loaded nor lost (docs/contracts/audit.md, "Transactions").
(The rows' directory follows their event-time field, the audit their Kafka timestamp:
with producers that stamp records with the event time, as the audited producer does,
the two agree.)

Late data (docs/contracts/audit.md, "Late data"): a run that adds records to a period
that already has its ``_SUCCESS`` withdraws that marker in its own commit (ingest/job.py,
``stale_markers``), so no ``_SUCCESS`` ever sits beside files it does not describe; the
next audit audits the period again like any other, and finalize writes ``_SUCCESS`` once
more with the new counts, the next revision and the records that came late. What a
period was at its first ``_SUCCESS`` is kept in ``_REVISION`` beside the marker (a rerun
deletes ``_SUCCESS``, never ``_REVISION``), so revisions only grow.
"""

from __future__ import annotations

import json
import socket
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from broker.client.producer import Producer
from broker.client.simple_consumer import SimpleConsumer
from broker.util.clock import DAY_MS, HOUR_MS, SECOND_MS
from broker.util.clock import now_ms as wall_clock_ms
from ingest import layout
from ingest.commit import list_runs, load_manifest
from ingest.config import kafka_security
from ingest.fs import FileSystem
from ingest.manifest import Manifest
from ingest.plugins import TopicContext, TopicPlugins
from schemas.audited_producer import AUDIT_SCHEMA
from schemas.client import RegistryClient, RegistrySettings
from schemas.serde import AvroDeserializer, AvroSerializer
from schemas.windows import window_start

PUBLISHED = "audit-published"
# Beside a period's _SUCCESS: its revision and what it held when it was first finalized.
REVISION = "_REVISION"


@dataclass
class WindowReport:
    topic: str
    window_start_ms: int
    produced: int
    loaded: int
    quarantined: int
    aborted: int = 0  # skipped: their transactions aborted (read_committed)

    @property
    def accounted(self) -> int:
        return self.loaded + self.quarantined + self.aborted

    def complete(self, threshold: float) -> bool:
        return self.produced > 0 and threshold * self.produced <= self.accounted <= self.produced


@dataclass
class HourReport:
    """One audited period of a topic: an hour (``hr`` set) or a day (``hr`` None)."""

    topic: str
    dt: str
    hr: str | None
    produced: int = 0
    loaded: int = 0
    quarantined: int = 0
    windows: list[WindowReport] = field(default_factory=list)
    partitions_past: bool = False
    complete: bool = False
    reasons: list[str] = field(default_factory=list)
    period_ms: int = HOUR_MS
    marker: str = ""  # the _SUCCESS file finalize writes (relative to the root)
    aborted: int = 0  # records of aborted transactions, accounted but not loaded
    # 1 for the first _SUCCESS of the period, +1 for every later one (late data, reruns).
    revision: int = 1
    # Records (loaded + quarantined + aborted) accounted after the period's first _SUCCESS.
    late: int = 0

    @property
    def accounted(self) -> int:
        return self.loaded + self.quarantined + self.aborted

    @property
    def label(self) -> str:
        return self.dt if self.hr is None else f"{self.dt} {self.hr}h"

    @property
    def start_ms(self) -> int:
        return layout.Hour(self.dt, self.hr or "00").start_ms

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.period_ms

    @property
    def completeness(self) -> float:
        return self.accounted / self.produced if self.produced else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["completeness"] = round(self.completeness, 6)
        return d


@dataclass
class AuditReport:
    run_id: str | None
    generated_at_ms: int
    threshold: float
    hours: list[HourReport] = field(default_factory=list)
    gaps: dict[str, int] = field(default_factory=dict)  # topic -> offsets lost to retention
    # topic -> {"aborted": records, "markers": offsets}: skipped, neither lost nor gaps
    transactions: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def complete_hours(self) -> list[HourReport]:
        return [h for h in self.hours if h.complete]

    @property
    def incomplete_hours(self) -> list[HourReport]:
        return [h for h in self.hours if not h.complete]

    def to_dict(self) -> dict:
        return {
            "run_id": self.run_id,
            "generated_at_ms": self.generated_at_ms,
            "threshold": self.threshold,
            "gaps": self.gaps,
            "transactions": self.transactions,
            "hours": [h.to_dict() for h in self.hours],
        }

    @classmethod
    def from_dict(cls, d: dict) -> AuditReport:
        hours = []
        for h in d["hours"]:
            fields = {
                k: v for k, v in h.items() if k not in ("completeness", "windows", "accounted")
            }
            hours.append(HourReport(**fields, windows=[WindowReport(**w) for w in h["windows"]]))
        return cls(
            d["run_id"],
            d["generated_at_ms"],
            d["threshold"],
            hours,
            d.get("gaps", {}),
            d.get("transactions", {}),
        )

    def text(self) -> str:
        lines = [
            f"audit of run {self.run_id} (threshold {self.threshold:g})",
            f"{'topic':<20} {'hour':<16} {'produced':>10} {'loaded':>10} {'quarant.':>9} "
            f"{'complete':>9} {'late':>7}  notes",
        ]
        for h in self.hours:
            notes = list(h.reasons)
            if h.revision > 1:
                notes.insert(0, f"revision {h.revision}")
            lines.append(
                f"{h.topic:<20} {h.label:<16} {h.produced:>10,} {h.loaded:>10,} "
                f"{h.quarantined:>9,} {'yes' if h.complete else 'NO':>9} {h.late:>7,}  "
                f"{'; '.join(notes)}"
            )
        for topic, lost in sorted(self.gaps.items()):
            lines.append(f"gap: {topic} lost {lost:,} offsets to retention before they were loaded")
        for topic, t in sorted(self.transactions.items()):
            lines.append(
                f"transactions: {topic} skipped {t['aborted']:,} aborted records and "
                f"{t['markers']:,} markers (not loaded, not lost, not gaps)"
            )
        return "\n".join(lines)


def current_manifests(fs: FileSystem) -> list[Manifest]:
    """The manifests whose files are live: every committed run not replaced by a rerun."""
    manifests = [load_manifest(fs, r) for r in list_runs(fs)]
    replaced = {m.replaces for m in manifests if m.replaces}
    return [m for m in manifests if m.run_id not in replaced]


def producer_counts(config: dict[str, Any], registry: RegistryClient) -> dict[tuple[str, int], int]:
    """Sum of producer-tier counts per (topic, window) over the whole audit topic."""
    topic = config["audit.topic"]
    decode = AvroDeserializer(registry)
    counts: dict[tuple[str, int], int] = defaultdict(int)
    with SimpleConsumer(config["bootstrap.servers"], security=kafka_security(config)) as consumer:
        consumer.cluster.refresh([topic])
        if topic not in consumer.cluster.topics:
            return {}
        for partition in consumer.partitions_for(topic):
            offset, end = (
                consumer.earliest_offset(topic, partition),
                consumer.latest_offset(topic, partition),
            )
            while offset < end:
                result = consumer.fetch(topic, partition, offset)
                result.raise_for_error()
                for record in result.records():
                    if record.offset >= end:
                        break
                    event = decode(record.value, topic)
                    if (
                        event["tier"] == "producer"
                        and event["window_ms"] == config["audit.window.ms"]
                    ):
                        counts[(event["topic"], _epoch_ms(event["window_start_ms"]))] += event[
                            "count"
                        ]
                offset = result.next_offset
    return counts


class _Periods:
    """How a topic is audited: the period of its directories and where a verdict goes."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.plugins = TopicPlugins.from_config(config)
        self.time_field = config["time.field"]
        self._known: dict[str, tuple[int, bool]] = {}

    def of(self, topic: str) -> tuple[int, bool]:
        """(period in ms, whether a period is a directory of its own)."""
        if topic not in self._known:
            context = TopicContext(topic, None, self.time_field, 0)
            period = self.plugins.partitioner(context).period_ms
            self._known[topic] = (HOUR_MS, False) if period is None else (period, True)
        return self._known[topic]

    def report(self, topic: str, start_ms: int) -> HourReport:
        period, own_directory = self.of(topic)
        hour = layout.Hour.of_ms(start_ms)
        if period == HOUR_MS:
            h = HourReport(topic, hour.dt, hour.hr)
        elif period == DAY_MS:
            h = HourReport(topic, hour.dt, None, period_ms=period)
        else:
            raise ValueError(f"{topic}: the audit reports hours and days, not {period} ms")
        if own_directory:
            key = hour if h.hr is not None else layout.Day(hour.dt)
            h.marker = layout.success_marker(topic, key)
        else:
            h.marker = layout.audit_marker(topic, hour)
        return h


def audit(
    config: dict[str, Any], fs: FileSystem, run_id: str | None = None, now_ms: int | None = None
) -> AuditReport:
    """Audit every topic-period the live manifests touch that has no _SUCCESS yet."""
    now_ms = now_ms if now_ms is not None else wall_clock_ms()
    window_ms = config["audit.window.ms"]
    threshold = config["audit.threshold"]
    manifests = current_manifests(fs)
    run_id = run_id or (manifests[-1].run_id if manifests else None)
    report = AuditReport(run_id, now_ms, threshold)
    loaded: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0, 0])
    committed_next: dict[tuple[str, int], int] = {}
    for m in manifests:
        for w in m.windows:
            loaded[(w.topic, w.window_start_ms)][0] += w.loaded
            loaded[(w.topic, w.window_start_ms)][1] += w.quarantined
            loaded[(w.topic, w.window_start_ms)][2] += w.aborted
        for p in m.partitions:
            key = (p.topic, p.partition)
            committed_next[key] = max(committed_next.get(key, 0), p.next)
            if p.gap is not None and m.kind == "load":
                report.gaps[p.topic] = report.gaps.get(p.topic, 0) + p.gap.size
            if (p.aborted or p.markers) and m.kind == "load":
                t = report.transactions.setdefault(p.topic, {"aborted": 0, "markers": 0})
                t["aborted"] += p.aborted
                t["markers"] += p.markers
    registry = RegistrySettings.from_config(config).client()
    produced = producer_counts(config, registry)
    periods = _Periods(config)
    hours: dict[tuple[str, int], list[int]] = defaultdict(list)
    loaded_topics = {t for t, _ in loaded}
    for topic, window in set(loaded) | {k for k in produced if k[0] in loaded_topics}:
        hours[(topic, window_start(window, periods.of(topic)[0]))].append(window)
    with SimpleConsumer(config["bootstrap.servers"], security=kafka_security(config)) as consumer:
        for (topic, start_ms), windows in sorted(hours.items()):
            h = periods.report(topic, start_ms)
            if fs.exists(h.marker):
                continue
            for window in sorted(windows):
                n_loaded, n_bad, n_aborted = loaded.get((topic, window), (0, 0, 0))
                w = WindowReport(
                    topic, window, produced.get((topic, window), 0), n_loaded, n_bad, n_aborted
                )
                h.windows.append(w)
                h.produced += w.produced
                h.loaded += w.loaded
                h.quarantined += w.quarantined
                h.aborted += w.aborted
                if w.produced == 0:
                    h.reasons.append(f"no producer count for window {_hhmm(window)}")
                elif w.accounted > w.produced:
                    h.reasons.append(
                        f"window {_hhmm(window)}: {w.accounted - w.produced} more than produced"
                    )
                elif not w.complete(threshold):
                    h.reasons.append(f"window {_hhmm(window)}: {w.accounted}/{w.produced}")
            h.partitions_past = _partitions_past(
                consumer, topic, h.end_ms, committed_next, now_ms, window_ms
            )
            if not h.partitions_past:
                h.reasons.append("not every partition is loaded past the period's end yet")
            h.complete = h.partitions_past and all(w.complete(threshold) for w in h.windows)
            before = read_revision(fs, h.marker)
            if before is not None:
                h.revision = before["revision"] + 1
                h.late = max(h.accounted - before["first_accounted"], 0)
                if h.late:
                    h.reasons.insert(0, f"{h.late:,} late record(s) since _SUCCESS")
            report.hours.append(h)
    return report


def _epoch_ms(value) -> int:
    """timestamp-millis fields may decode as datetimes."""
    return value if isinstance(value, int) else int(value.timestamp() * SECOND_MS)


def _hhmm(ms: int) -> str:
    return time.strftime("%H:%M", time.gmtime(ms / SECOND_MS))


def _partitions_past(
    consumer: SimpleConsumer,
    topic: str,
    hour_end_ms: int,
    committed_next: dict[tuple[str, int], int],
    now_ms: int,
    grace_ms: int,
) -> bool:
    """Every partition's committed offset is at or past the first record after the hour;
    a partition with no record after the hour counts once it is loaded to its high
    watermark and the hour ended more than a window ago (late records have had time)."""
    for partition in consumer.partitions_for(topic):
        done = committed_next.get((topic, partition), 0)
        first_after = consumer.offsets_before(topic, partition, hour_end_ms)
        if first_after >= 0:
            if done < first_after:
                return False
        elif done < consumer.latest_offset(topic, partition) or now_ms < hour_end_ms + grace_ms:
            return False
    return True


def report_path(run_id: str) -> str:
    return f"{layout.history_dir(run_id)}/audit.json"


def read_report(fs: FileSystem, run_id: str) -> AuditReport:
    return AuditReport.from_dict(json.loads(fs.read_bytes(report_path(run_id))))


def write_report(fs: FileSystem, report: AuditReport) -> str:
    path = report_path(report.run_id)
    fs.write_bytes(path, json.dumps(report.to_dict(), indent=1).encode())
    return path


def revision_file(marker: str) -> str:
    return f"{marker.rsplit('/', 1)[0]}/{REVISION}"


def read_revision(fs: FileSystem, marker: str) -> dict | None:
    """The period's ``_REVISION`` (None: never finalized): ``revision`` (of its newest
    ``_SUCCESS``), ``first_accounted`` (records its first ``_SUCCESS`` counted) and
    ``revisions`` (run, counts and late records of each)."""
    try:
        return json.loads(fs.read_bytes(revision_file(marker)))
    except FileNotFoundError:
        return None


def finalize(fs: FileSystem, report: AuditReport) -> list[HourReport]:
    """_SUCCESS (holding the period's report) for every complete period, after its
    ``_REVISION``: a crash in between leaves a revision recorded that no _SUCCESS carries,
    so the next one skips a number, never reuses one. Finalizing a report again (a retried
    task) writes the same revision again."""
    done = []
    for h in report.complete_hours:
        marker = h.marker or layout.success_marker(h.topic, layout.Hour(h.dt, h.hr))
        before = read_revision(fs, marker) or {
            "revision": 0,
            "first_accounted": h.accounted,
            "revisions": [],
        }
        entry = {
            "revision": h.revision,
            "run_id": report.run_id,
            "loaded": h.loaded,
            "quarantined": h.quarantined,
            "late": h.late,
        }
        revisions = [r for r in before["revisions"] if r["revision"] < h.revision] + [entry]
        state = {
            "revision": max(before["revision"], h.revision),
            "first_accounted": before["first_accounted"],
            "revisions": revisions,
        }
        fs.write_bytes(revision_file(marker), json.dumps(state, indent=1).encode())
        fs.write_bytes(marker, json.dumps(h.to_dict(), indent=1).encode())
        done.append(h)
    return done


def stale_markers(config: dict[str, Any], fs: FileSystem, manifest: Manifest) -> list[str]:
    """The ``_SUCCESS`` markers a run's records make stale: those of the directories its
    files go into, and the audit verdicts (``_audit/``) of the event hours its records
    count in. The run's commit deletes them (docs/contracts/audit.md, "Late data")."""
    periods = _Periods(config)
    candidates = {
        layout.success_marker_beside(f.path) for p in manifest.partitions for f in p.files
    }
    for w in manifest.windows:
        if w.loaded + w.quarantined + w.aborted:
            start = window_start(w.window_start_ms, periods.of(w.topic)[0])
            candidates.add(periods.report(w.topic, start).marker)
    return sorted(m for m in candidates if fs.exists(m))


def publish_loaded_counts(config: dict[str, Any], fs: FileSystem, manifest: Manifest) -> int:
    """The loader's counts (loaded + quarantined + aborted) per (topic, window) as tier
    "hadoop", once per load run (a marker in its history); reruns publish nothing: they
    change no count."""
    marker = f"{layout.history_dir(manifest.run_id)}/{PUBLISHED}"
    if manifest.kind != "load" or not manifest.windows or fs.exists(marker):
        return 0
    serialize = AvroSerializer(RegistrySettings.from_config(config).client(), AUDIT_SCHEMA)
    topic = config["audit.topic"]
    now = wall_clock_ms()
    with Producer(
        config["bootstrap.servers"], acks=-1, security=kafka_security(config)
    ) as producer:
        futures = [
            producer.send(
                topic,
                serialize(
                    {
                        "tier": "hadoop",
                        "host": socket.gethostname(),
                        "service": "kafka-hourly-load",
                        "topic": w.topic,
                        "window_start_ms": w.window_start_ms,
                        "window_ms": manifest.window_ms,
                        # what the load accounts for, as the audit compares it
                        "count": w.loaded + w.quarantined + w.aborted,
                        "emitted_at_ms": now,
                    },
                    topic,
                ),
                key=w.topic.encode(),
            )
            for w in manifest.windows
        ]
        producer.flush()
    for f in futures:
        f.result()
    fs.write_bytes(marker, manifest.run_id.encode())
    return len(futures)
