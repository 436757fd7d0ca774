"""Exactly once through a crash of the application: a consume-transform-produce copier
(tests/transactions/eos_copier.py, confluent-kafka) is SIGKILLed with a transaction open and
started again under the same transactional id; the output read read_committed holds every
input record exactly once (docs/contracts/transactions.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from broker.processes import BrokerProcess
from tests.transactions.test_transactional_clients import SETTINGS, _read

pytestmark = pytest.mark.clients

ROOT = Path(__file__).resolve().parents[2]
TOTAL = 400
PARTITIONS = 2


class Copier:
    """One run of the copier process, its stdout followed line by line."""

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

    def until(self, predicate) -> str:
        """Read lines until one satisfies `predicate`; fails if the copier exits first."""
        for line in self.process.stdout:
            line = line.strip()
            self.lines.append(line)
            if predicate(line):
                return line
        raise AssertionError(f"the copier exited ({self.process.wait()}): {self.lines[-5:]}")

    def committed_at_least(self, count: int):
        return lambda line: line.startswith("committed ") and int(line.split()[1]) >= count

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def finish(self, timeout_s: float = 90) -> None:
        self.until(lambda line: line == "done")
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
    first.until(first.committed_at_least(TOTAL // 3))
    # The next transaction's records are written and held uncommitted: kill it now.
    first.until(lambda line: line.startswith("open "))
    first.kill()
    second = Copier(bootstrap, n)
    second.finish()
    uncommitted = assert_exactly_once(bootstrap, n["output"])
    # The kill left records of an open transaction in the log: the restart aborted them.
    assert len(uncommitted) > TOTAL
