"""The window of a timestamp: the one definition the audited producer, the load's tasks,
its partitioners and the audit share. The audit compares producers' counts with the
load's per window, so it is right only if every side puts a record in the same window.

Windows are aligned to the epoch (so to UTC hours and days) and a timestamp belongs to
the window starting at or before it: ``start = t - t mod w`` with the modulo rounding
toward minus infinity, so times before 1970 fall in the window that holds them too.
An audit window is ``window_start(kafka_timestamp, audit.window.ms)``; an event hour is
``window_start(event_time, HOUR_MS)``, an event day ``window_start(event_time, DAY_MS)``.
"""

from __future__ import annotations

from typing import Any

from broker.util.clock import MINUTE_MS

# The audit window producers and the load count in unless configured otherwise
# (AuditedProducer's window_ms, the load's audit.window.ms): they must agree.
DEFAULT_AUDIT_WINDOW_MS = 10 * MINUTE_MS


def window_start(timestamp_ms: Any, window_ms: int) -> Any:
    """The start (ms) of the ``window_ms`` window holding ``timestamp_ms``: of one int,
    or of every value of an Arrow integer array (one kernel per step, no Python per row;
    nulls stay null)."""
    if isinstance(timestamp_ms, int):
        return timestamp_ms - timestamp_ms % window_ms  # Python's % rounds toward -inf
    import pyarrow as pa
    import pyarrow.compute as pc

    values = timestamp_ms.cast(pa.int64())
    # Arrow's integer division truncates toward zero: one step back for a negative
    # value that is not already on a window boundary.
    start = pc.multiply(pc.divide(values, window_ms), window_ms)
    behind = pc.less(values, start)
    return pc.if_else(behind, pc.subtract(start, window_ms), start)
