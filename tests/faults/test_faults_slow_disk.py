"""The slow-disk nemesis, quick variant (one fault, fixed seed): the leader of the
workload's partition 0 writes and fsyncs through a FUSE passthrough that sleeps
(tests/faults/slow_disk.py) while an idempotent acks=all producer runs; the checkers
(tests/faults/checkers.py) must find nothing acknowledged lost and no duplicates."""

from __future__ import annotations

import pytest

from tests.faults import campaign, slow_disk
from tests.faults.nemesis import NEMESES, FailingDisk
from tests.faults.test_faults_quick import assert_clean


def test_the_control_file_gives_seconds_per_operation_kind():
    assert slow_disk.parse_control("write=200 fsync=1000\n") == {
        "write": 0.2, "fsync": 1.0, "read": 0.0,
    }  # fmt: skip
    assert slow_disk.parse_control("") == {"write": 0.0, "fsync": 0.0, "read": 0.0}
    assert slow_disk.parse_control("write=-5 fsync=x other=9")["write"] == 0.0
    assert slow_disk.parse_control("write=1 eio=write,fsync")["write"] == 0.001


def test_the_control_file_names_the_failing_operations(tmp_path):
    control = tmp_path / "control"
    slow_disk.set_delay(control, eio=("write", "fsync"))
    assert slow_disk.parse_failures(control.read_text()) == {"write", "fsync"}
    assert slow_disk.parse_failures("eio=fsync,bogus") == {"fsync"}
    slow_disk.set_delay(control, fsync_ms=5)
    assert slow_disk.parse_failures(control.read_text()) == frozenset()


@pytest.mark.slow
def test_a_slow_leader_disk_loses_nothing(slow_disk_cluster):
    result = campaign.run_producer(slow_disk_cluster, NEMESES["slow-disk-leader"], 31)
    faults = [str(op.value) for op in result.history.faults() if op.type == "ok"]
    assert any(" ms fsync " in f for f in faults), faults  # the disk was slowed, not skipped
    assert_clean(result)


@pytest.mark.slow
def test_a_failing_leader_disk_goes_offline_and_loses_nothing(slow_disk_cluster):
    """Every write and fsync of the leader's log dir fails with EIO (a FUSE error mode):
    its broker takes the dir offline (KAFKA_STORAGE_ERROR, a clear log line) and, its
    only log dir gone, halts; the leadership of partition 0 moves away, and once the disk
    works and the broker is started again nothing acknowledged is missing."""
    nemesis = FailingDisk("leader")
    result = campaign.run_producer(slow_disk_cluster, nemesis, 32, fault_s=3.0)
    faults = [str(op.value) for op in result.history.faults() if op.type == "ok"]
    victim = int(faults[0].split()[0].removeprefix("broker-"))
    assert nemesis.moved_to not in (None, victim), faults
    assert "is offline" in slow_disk_cluster.broker(victim).log_text()
    assert_clean(result)
