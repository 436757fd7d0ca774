"""Which committed runs a DAG run produced, and what a rerun changed.

spark-submit returns only an exit code, so the tasks after it find the job's run in the
root's history: run ids sort by time and the run lock serialises loads, so the runs
committed during this DAG run are exactly those after the newest id seen before it.
"""

from __future__ import annotations

import json

from ingest.commit import list_runs, load_manifest
from ingest.fs import FileSystem
from ingest.manifest import Manifest


def newest_run(fs: FileSystem) -> str | None:
    runs = list_runs(fs)
    return runs[-1] if runs else None


def runs_after(fs: FileSystem, baseline: str | None, kind: str) -> list[Manifest]:
    manifests = [load_manifest(fs, r) for r in list_runs(fs) if baseline is None or r > baseline]
    return [m for m in manifests if m.kind == kind]


def compare_rerun(old: Manifest, new: Manifest) -> list[str]:
    """What differs between a stored run and its rerun, partition by partition. The offset
    ranges must be identical (a rerun re-reads exactly them) and every ledger must balance;
    loaded and quarantined may trade places (the point of a rerun after a decoder fix)."""
    problems = [f"ledger: {p}" for p in new.problems()]
    before = {(p.topic, p.partition): p for p in old.partitions}
    after = {(p.topic, p.partition): p for p in new.partitions}
    if set(before) != set(after):
        problems.append(f"partitions differ: {sorted(set(before) ^ set(after))}")
    for key in sorted(set(before) & set(after)):
        a, b = before[key], after[key]
        if (a.first, a.next) != (b.first, b.next):
            problems.append(
                f"{key[0]}[{key[1]}]: range {a.first}..{a.next} became {b.first}..{b.next}"
            )
    return problems


def count_changes(old: Manifest, new: Manifest) -> list[str]:
    """Per-partition count changes, for the log (not errors by themselves)."""
    before = {(p.topic, p.partition): p for p in old.partitions}
    lines = []
    for p in new.partitions:
        a = before.get((p.topic, p.partition))
        if a and (a.loaded, a.quarantined, a.skipped) != (p.loaded, p.quarantined, p.skipped):
            lines.append(
                f"{p.topic}[{p.partition}]: loaded {a.loaded} -> {p.loaded}, "
                f"quarantined {a.quarantined} -> {p.quarantined}, skipped {a.skipped} -> {p.skipped}"
            )
    return lines


def hour_report(success_marker: bytes) -> dict:
    """The hour's audit as finalize wrote it into _SUCCESS (HourReport.to_dict())."""
    return json.loads(success_marker)
