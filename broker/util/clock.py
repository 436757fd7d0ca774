"""The wall clock in Kafka's unit (milliseconds since the epoch) and the time units
the product computes with: log retention, event hours, audit windows, schedules."""

from __future__ import annotations

import time

SECOND_MS = 1_000
MINUTE_MS = 60 * SECOND_MS
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS


def now_ms() -> int:
    """Milliseconds since the epoch, the unit of every Kafka timestamp."""
    return time.time_ns() // 1_000_000
