"""`python -m ingest status`: the product on one screen -- the brokers and the controller,
under-replicated and offline partitions, consumer groups with lag, the registry's leader,
the last load run, and per topic the hours complete and incomplete with the audit's
verdict. Everything is read from the services themselves (Metadata, the groups' committed
offsets, the registry's /metrics, the root's manifests and audit reports); a service that
does not answer is shown so, in red, and the rest is still shown.

`gather` collects (I/O), `render` lays out (no I/O), colour only where the terminal has it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from broker.client.admin import AdminClient
from broker.tools.groups import GroupTool
from broker.tools.output import Output
from ingest import metrics
from ingest.audit import read_report, report_path
from ingest.commit import list_runs, load_manifest
from ingest.config import kafka_security
from schemas.client import RegistrySettings

OK, WARN, BAD = "ok", "warn", "bad"
COLOURS = {OK: "\033[32m", WARN: "\033[33m", BAD: "\033[31m"}
RESET = "\033[0m"
SHOWN = 5  # partitions or groups listed by name before "and N more"


@dataclass
class Line:
    text: str
    level: str = OK


@dataclass
class Section:
    title: str
    lines: list[Line] = field(default_factory=list)

    def add(self, text: str, level: str = OK) -> None:
        self.lines.append(Line(text, level))


def gather(config: dict[str, Any], fs) -> list[Section]:
    return [
        _cluster(config),
        _groups(config),
        _registry(config),
        *_load(fs),
    ]


def _cluster(config) -> Section:
    section = Section("brokers")
    bootstrap = ",".join(config["bootstrap.servers"])
    try:
        with AdminClient(
            bootstrap, request_timeout_ms=5000, security=kafka_security(config)
        ) as admin:
            cluster = admin.describe_cluster()
            topics = admin.describe_topics()
    except Exception as exc:  # any failure to reach the cluster is what status reports
        section.add(f"{bootstrap}: not reachable ({exc})", BAD)
        return section
    ids = sorted(b.node_id for b in cluster.brokers)
    controller = cluster.controller_id
    section.add(
        f"{len(ids)} broker(s) {', '.join(map(str, ids))}; controller "
        + (str(controller) if controller >= 0 else "none"),
        OK if controller >= 0 else BAD,
    )
    partitions = [(t.name, p) for t in topics.values() for p in t.partitions]
    under = [
        f"{t}-{p.partition}"
        for t, p in partitions
        if 0 <= p.leader and len(p.isr) < len(p.replicas)
    ]
    offline = [f"{t}-{p.partition}" for t, p in partitions if p.leader < 0]
    section.add(f"{len(partitions)} partitions in {len(topics)} topics")
    section.add(f"{len(under)} under-replicated{_names(under)}", WARN if under else OK)
    section.add(f"{len(offline)} offline{_names(offline)}", BAD if offline else OK)
    return section


def _groups(config) -> Section:
    section = Section("consumer groups")
    bootstrap = ",".join(config["bootstrap.servers"])
    try:
        with GroupTool(
            bootstrap, 5000, Output(sys.stdout, sys.stderr), kafka_security(config)
        ) as tool:
            listings = tool.consumer_groups()
            rows = []
            for g in sorted(listings, key=lambda g: g.group_id):
                committed = tool.admin.list_group_offsets(g.group_id)
                ends = tool.log_end_offsets(sorted(committed))
                lag = sum(
                    max(end - committed[tp].offset, 0)
                    for tp, end in ends.items()
                    if end is not None
                )
                rows.append((g.group_id, g.state or "?", lag, len(committed)))
    except Exception as exc:
        section.add(f"not available ({exc})", BAD)
        return section
    if not rows:
        section.add("none")
    lagging = [r for r in rows if r[2] > 0]
    for group_id, state, lag, partitions in (lagging or rows)[:SHOWN]:
        section.add(
            f"{group_id}: {state}, lag {lag:,} over {partitions} partition(s)",
            WARN if lag else OK,
        )
    rest = len(lagging or rows) - SHOWN
    if rest > 0:
        section.add(f"and {rest} more" + (" lagging" if lagging else ""))
    if lagging and len(lagging) < len(rows):
        section.add(f"{len(rows) - len(lagging)} other group(s) with no lag")
    return section


def _registry(config) -> Section:
    section = Section("schema registry")
    settings = RegistrySettings.from_config(config)
    url = settings.url.rstrip("/")
    try:
        with settings.client(timeout=5.0) as registry:
            text = registry.metrics()
    except Exception as exc:
        section.add(f"{url}: not reachable ({exc})", BAD)
        return section
    values = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    leader = values.get("schema_registry_leader") == 1
    section.add(
        f"{url}: {'leader' if leader else 'follower'}, "
        f"{int(values.get('schema_registry_subjects', 0))} subjects, "
        f"{int(values.get('schema_registry_schemas', 0))} schemas",
        OK if leader else WARN,
    )
    return section


def _load(fs) -> list[Section]:
    section = Section("hourly load")
    runs = list_runs(fs)
    if not runs:
        section.add("no run committed yet", WARN)
        return [section]
    manifest = load_manifest(fs, runs[-1])
    loads = [r for r in reversed(runs) if load_manifest(fs, r).kind == "load"]
    age = _age(manifest.created_at)
    section.add(
        f"last run {manifest.run_id} ({manifest.kind}), committed {age} ago: "
        f"{sum(p.loaded for p in manifest.partitions):,} records, "
        f"{sum(p.quarantined for p in manifest.partitions):,} quarantined",
        OK,
    )
    if loads and loads[0] != manifest.run_id:
        section.add(f"last load run {loads[0]}")
    hours = Section("hours by topic (audit)")
    audited = next((r for r in reversed(runs) if fs.exists(report_path(r))), None)
    topics = sorted({p.topic for p in manifest.partitions})
    report = read_report(fs, audited) if audited else None
    for topic in topics:
        newest = metrics.newest_complete_hour(fs, topic)
        judged = [h for h in (report.hours if report else []) if h.topic == topic]
        waiting = [h for h in judged if not h.complete]
        done = f"complete up to {newest.dt} {newest.hr}h" if newest else "no complete hour yet"
        text = f"{topic}: {done}"
        if waiting:
            text += "; incomplete: " + ", ".join(
                f"{h.label} ({'; '.join(h.reasons) or 'waiting'})" for h in waiting[:3]
            )
            if len(waiting) > 3:
                text += f" and {len(waiting) - 3} more"
        hours.add(text, WARN if waiting or newest is None else OK)
        late = [h for h in judged if h.late]
        if late:
            hours.add(
                f"{topic}: late records: "
                + ", ".join(
                    f"{h.label} +{h.late:,}"
                    + (f" (revision {h.revision})" if h.complete else " (not audited again yet)")
                    for h in late[:SHOWN]
                )
                + (f" and {len(late) - SHOWN} more" if len(late) > SHOWN else ""),
                OK if all(h.complete for h in late) else WARN,
            )
    if report is None:
        hours.add("no audit report yet", WARN)
    return [section, hours]


def _names(items: list[str]) -> str:
    if not items:
        return ""
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ": " + ", ".join(items[:SHOWN]) + more


def _age(created_at: str) -> str:
    then = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    seconds = max(int((datetime.now(UTC) - then).total_seconds()), 0)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h {seconds % 3600 // 60}m"


def render(sections: list[Section], colour: bool) -> str:
    out = []
    marks = {OK: " ", WARN: "!", BAD: "x"}
    for section in sections:
        out.append(section.title.upper() if not colour else f"\033[1m{section.title}{RESET}")
        for line in section.lines:
            text = f"  {marks[line.level]} {line.text}"
            if colour and line.level != OK:
                text = f"{COLOURS[line.level]}{text}{RESET}"
            out.append(text)
    return "\n".join(out)


def worst(sections: list[Section]) -> str:
    levels = {line.level for s in sections for line in s.lines}
    return BAD if BAD in levels else WARN if WARN in levels else OK


def colour_wanted(stream) -> bool:
    """Colour on a terminal that has it, unless NO_COLOR is set (no-color.org)."""
    return (
        hasattr(stream, "isatty")
        and stream.isatty()
        and os.environ.get("TERM", "dumb") != "dumb"
        and "NO_COLOR" not in os.environ
    )
