"""The audit gate's verdict on a report: which incomplete hours are late, which may still
complete.

An hour [H, H+1h) can only be complete once every partition is loaded past H+1h and the
producers have published their counts for its last window, so right after the hour an
incomplete audit is normal. It becomes an incident when the hour is still incomplete
`deadline` after it ended: records were lost, duplicated, or never counted. The same
holds for a day (a topic with the event-day partitioner): late `deadline` after its end.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from broker.util.clock import HOUR_MS, SECOND_MS
from ingest import layout

DEADLINE_VARIABLE = "kafka_hourly_hour_deadline_minutes"
DEFAULT_DEADLINE = timedelta(hours=2)


@dataclass(frozen=True)
class Verdict:
    complete: list[dict]  # HourReport.to_dict() of each complete hour
    waiting: list[dict]  # incomplete, within the deadline
    late: list[dict]  # incomplete past the deadline

    def summary(self) -> str:
        return (
            f"{len(self.complete)} hour(s) complete, {len(self.waiting)} not yet complete, "
            f"{len(self.late)} incomplete past the deadline"
        )


def hour_end_ms(hour: dict) -> int:
    """The end of an audited period (HourReport.to_dict()): an hour, or a day."""
    start = layout.Hour(hour["dt"], hour["hr"] or "00").start_ms
    return start + hour.get("period_ms", HOUR_MS)


def judge(hours: list[dict], now_ms: int, deadline: timedelta) -> Verdict:
    complete, waiting, late = [], [], []
    for h in hours:
        if h["complete"]:
            complete.append(h)
        elif now_ms >= hour_end_ms(h) + deadline.total_seconds() * SECOND_MS:
            late.append(h)
        else:
            waiting.append(h)
    return Verdict(complete, waiting, late)


def deadline_from(value: str | None) -> timedelta:
    """The Variable's value in minutes, or the default when it is not set."""
    if value in (None, ""):
        return DEFAULT_DEADLINE
    minutes = float(value)
    if minutes <= 0:
        raise ValueError(f"{DEADLINE_VARIABLE} must be a positive number of minutes, not {value!r}")
    return timedelta(minutes=minutes)


def report_from_dict(data: dict):
    """The AuditReport the audit task handed over in XCom (AuditReport.to_dict()), so
    finalize writes _SUCCESS for exactly the hours the audit found complete."""
    from ingest.audit import AuditReport

    return AuditReport.from_dict(data)
