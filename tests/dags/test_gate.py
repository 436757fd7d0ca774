"""The audit gate's verdict: complete, still waiting, or late past the deadline."""

from __future__ import annotations

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
