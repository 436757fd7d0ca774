"""Exactly once through a crash of the application: a consume-transform-produce copier
(tests/transactions/eos_copier.py, confluent-kafka) is SIGKILLed with a transaction open and
started again under the same transactional id; the output read read_committed holds every
input record exactly once (docs/contracts/transactions.md)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from broker.processes import BrokerProcess
from tests.helpers.cluster import WAIT_S
from tests.transactions.test_transactional_clients import SETTINGS, _read

pytestmark = pytest.mark.clients

ROOT = Path(__file__).resolve().parents[2]
TOTAL = 400
PARTITIONS = 2


class Copier:
    """One run of the copier process, its stdout followed line by line (by a thread, so
    every wait on it has a deadline)."""

    def __init__(self, bootstrap: str, names: dict, hold_at: int = -1):
        args = [*(names[k] for k in ("input", "output", "group", "txn_id")), TOTAL, hold_at]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.transactions.eos_copier", bootstrap, *map(str, args)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._follow, daemon=True).start()

    def _follow(self) -> None:
        for line in self.process.stdout:
            self._queue.put(line.strip())
        self._queue.put(None)  # the copier closed its stdout: it exited

    def until(self, predicate, timeout_s: float = WAIT_S) -> str:
        """Read lines until one satisfies `predicate`; fails if the copier exits first or
        prints no such line within `timeout_s` (then it is killed)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.close()
                raise AssertionError(
                    f"the copier printed no awaited line in {timeout_s:.0f}s: {self.lines[-5:]}"
                ) from None
            if line is None:
                code = self.process.wait()
                raise AssertionError(f"the copier exited ({code}): {self.lines[-5:]}")
            self.lines.append(line)
            if predicate(line):
                return line

    def committed_at_least(self, count: int):
        return lambda line: line.startswith("committed ") and int(line.split()[1]) >= count

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def close(self) -> None:
        """Kill the copier if it still runs (a test that failed half way)."""
        if self.process.poll() is None:
            self.kill()

    def finish(self, timeout_s: float = 90) -> None:
        self.until(lambda line: line == "done", timeout_s)
        assert self.process.wait(timeout_s) == 0


def names() -> dict:
    tag = uuid.uuid4().hex[:6]
    return {k: f"eos-{k}-{tag}" for k in ("input", "output", "group", "txn_id")}


def fill_input(bootstrap: str, topic: str) -> None:
    """TOTAL numbered records, spread over the partitions (not transactional)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(TOTAL):
        producer.produce(topic, str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def assert_exactly_once(bootstrap: str, output: str) -> list:
    """The output, read read_committed: every input number once. Returns the records a
    read_uncommitted reader sees (with what the killed transactions left)."""
    got = _read(bootstrap, output, PARTITIONS, TOTAL, "read_committed")
    values = sorted(int(m.value()) for m in got)
    assert values == list(range(TOTAL)), f"{len(values)} records, {len(set(values))} distinct"
    return _read(bootstrap, output, PARTITIONS, TOTAL, "read_uncommitted")


@pytest.fixture(scope="module")
def eos_broker(tmp_path_factory):
    settings = {**SETTINGS, "group.initial.rebalance.delay.ms": "0"}
    with BrokerProcess(tmp_path_factory.mktemp("eos-broker") / "logs", settings) as b:
        yield b


def test_a_killed_copier_restarted_copies_each_record_once(eos_broker):
    bootstrap = eos_broker.bootstrap
    n = names()
    fill_input(bootstrap, n["input"])
    first = Copier(bootstrap, n, hold_at=TOTAL // 3)
    try:
        first.until(first.committed_at_least(TOTAL // 3))
        # The next transaction's records are written and held uncommitted: kill it now.
        first.until(lambda line: line.startswith("open "))
    finally:
        first.kill()
    second = Copier(bootstrap, n)
    try:
        second.finish()
    finally:
        second.close()
    uncommitted = assert_exactly_once(bootstrap, n["output"])
    # The kill left records of an open transaction in the log: the restart aborted them.
    assert len(uncommitted) > TOTAL
