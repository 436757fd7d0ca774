"""The audit gate's verdict: complete, still waiting, or late past the deadline."""

from __future__ import annotations

import json
import sys
from datetime import timedelta

import pytest

from broker.processes import ROOT
from broker.util.clock import HOUR_MS

sys.path.insert(0, str(ROOT / "dags"))
from ingest_airflow.gate import deadline_from, hour_end_ms, judge, report_from_dict  # noqa: E402

from ingest import layout  # noqa: E402
from ingest.audit import AuditReport, HourReport, WindowReport  # noqa: E402


def _hour(hr: str, complete: bool) -> dict:
    w = WindowReport("t", layout.Hour("2026-11-22", hr).start_ms, 10, 10 if complete else 7, 0)
    return HourReport("t", "2026-11-22", hr, 10, w.loaded, 0, [w], complete, complete).to_dict()


def test_incomplete_hours_wait_until_the_deadline_then_are_late():
    hours = [_hour("01", True), _hour("02", False), _hour("03", False)]
    end_02 = hour_end_ms(hours[1])
    assert end_02 == layout.Hour("2026-11-22", "03").start_ms
    deadline = timedelta(hours=2)
    just_before = judge(hours, end_02 + 2 * HOUR_MS - 1, deadline)
    assert [h["hr"] for h in just_before.complete] == ["01"]
    assert [h["hr"] for h in just_before.waiting] == ["02", "03"] and just_before.late == []
    at_deadline = judge(hours, end_02 + 2 * HOUR_MS, deadline)
    assert [h["hr"] for h in at_deadline.late] == ["02"]
    assert [h["hr"] for h in at_deadline.waiting] == ["03"]
    assert "1 incomplete past the deadline" in at_deadline.summary()


def test_deadline_variable():
    assert deadline_from(None) == deadline_from("") == timedelta(hours=2)
    assert deadline_from("90") == timedelta(minutes=90)
    with pytest.raises(ValueError, match="positive"):
        deadline_from("0")


def test_report_round_trips_through_xcom():
    report = AuditReport(
        "r",
        1,
        1.0,
        [
            HourReport(
                **{
                    k: v
                    for k, v in _hour("05", True).items()
                    if k not in ("completeness", "windows")
                },
                windows=[],
            )
        ],
        {"t": 3},
    )
    again = report_from_dict(report.to_dict())
    assert again.to_dict() == report.to_dict()


def test_a_reopened_hour_is_a_new_asset_event_with_its_revision(tmp_path):
    """finalize on a report whose hour late data re-opened: the next revision in _SUCCESS
    and in the Asset event's extra (the DAG's finalize task is these two calls)."""
    from collections import defaultdict

    from ingest_airflow import assets

    from ingest.audit import finalize
    from ingest.fs import LocalFileSystem

    class Events(defaultdict):  # the outlet_events accessor: alias -> .add(asset, extra)
        def __init__(self):
            super().__init__(
                lambda: type("A", (), {"add": lambda _, a, extra: added.append(extra)})()
            )

    added: list[dict] = []
    fs = LocalFileSystem(tmp_path)
    hour = dict(
        _hour("05", True),
        loaded=10,
        marker=layout.success_marker("t", layout.Hour("2026-11-22", "05")),
    )
    first = report_from_dict(
        {"run_id": "r1", "generated_at_ms": 1, "threshold": 1.0, "hours": [hour]}
    )
    late = dict(hour, loaded=13, revision=2, late=3)
    second = report_from_dict(
        {"run_id": "r2", "generated_at_ms": 2, "threshold": 1.0, "hours": [late]}
    )
    for report in (first, second, second):  # the last: a retried finalize task
        done = finalize(fs, report)
        assets.emit_hours(Events(), [h.to_dict() for h in done], fs.uri(), run_id=report.run_id)
    assert [(e["revision"], e["late"], e["loaded"]) for e in added] == [
        (1, 0, 10),
        (2, 3, 13),
        (2, 3, 13),
    ]
    state = json.loads(fs.read_bytes(f"{hour['marker'].rsplit('/', 1)[0]}/_REVISION"))
    assert state["revision"] == 2 and state["first_accounted"] == 10
    assert [r["revision"] for r in state["revisions"]] == [1, 2]
