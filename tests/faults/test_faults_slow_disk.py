"""The slow-disk nemesis, quick variant (one fault, fixed seed): the leader of the
workload's partition 0 writes and fsyncs through a FUSE passthrough that sleeps
(tests/faults/slow_disk.py) while an idempotent acks=all producer runs; the checkers
(tests/faults/checkers.py) must find nothing acknowledged lost and no duplicates."""

from __future__ import annotations

import pytest

from tests.faults import campaign, slow_disk
from tests.faults.nemesis import NEMESES
from tests.faults.test_faults_quick import assert_clean


def test_the_control_file_gives_seconds_per_operation_kind():
    assert slow_disk.parse_control("write=200 fsync=1000\n") == {
        "write": 0.2, "fsync": 1.0, "read": 0.0,
    }  # fmt: skip
    assert slow_disk.parse_control("") == {"write": 0.0, "fsync": 0.0, "read": 0.0}
    assert slow_disk.parse_control("write=-5 fsync=x other=9")["write"] == 0.0


@pytest.mark.slow
def test_a_slow_leader_disk_loses_nothing(slow_disk_cluster):
    result = campaign.run_producer(slow_disk_cluster, NEMESES["slow-disk-leader"], 31)
    faults = [str(op.value) for op in result.history.faults() if op.type == "ok"]
    assert any(" ms fsync " in f for f in faults), faults  # the disk was slowed, not skipped
    assert_clean(result)
