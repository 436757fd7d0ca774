"""The clock the tests move by hand: a `now_ms` callable for the log and the broker."""

from __future__ import annotations


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now
