"""A history of operations, in the Jepsen style: every operation a workload's process
attempts is recorded twice, when it is invoked and when it completes, with what it
returned. Completions are `ok` (it happened), `fail` (it certainly did not happen) or
`info` (it may or may not have happened: a timeout, a lost connection). The nemesis
records its faults in the same history (process "nemesis"), so a checker's finding can
be read against what was being done to the cluster at the time.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"


@dataclass(frozen=True)
class Op:
    index: int
    type: str  # invoke | ok | fail | info
    f: str  # what was done: "send", "assign", "commit", "register", "kill", ...
    process: str  # who did it: a producer, a group member, a registry client, "nemesis"
    value: object
    time: float  # seconds since the history started


class History:
    """Thread-safe, append-only."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self._lock = threading.Lock()
        self._started = time.monotonic()

    def add(self, type_: str, f: str, process: str, value: object = None) -> Op:
        with self._lock:
            op = Op(len(self.ops), type_, f, process, value, time.monotonic() - self._started)
            self.ops.append(op)
            return op

    def invoke(self, f: str, process: str, value: object = None) -> Op:
        return self.add(INVOKE, f, process, value)

    def ok(self, f: str, process: str, value: object = None) -> Op:
        return self.add(OK, f, process, value)

    def fail(self, f: str, process: str, value: object = None) -> Op:
        return self.add(FAIL, f, process, value)

    def info(self, f: str, process: str, value: object = None) -> Op:
        return self.add(INFO, f, process, value)

    def of(self, f: str, type_: str | None = None) -> list[Op]:
        with self._lock:
            return [op for op in self.ops if op.f == f and (type_ is None or op.type == type_)]

    def operations(self) -> int:
        """Completed client operations (the nemesis's own entries left out)."""
        with self._lock:
            return sum(1 for op in self.ops if op.type != INVOKE and op.process != "nemesis")

    def faults(self) -> list[Op]:
        with self._lock:
            return [op for op in self.ops if op.process == "nemesis"]

    def dump(self, path: Path) -> None:
        """One JSON object per line, for reading a run after the fact."""
        with self._lock, open(path, "w") as out:
            for op in self.ops:
                out.write(json.dumps(asdict(op), default=repr) + "\n")
