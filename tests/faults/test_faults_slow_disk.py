"""The slow-disk nemesis, quick variant (one fault, fixed seed): the leader of the
workload's partition 0 writes and fsyncs through a FUSE passthrough that sleeps
(tests/faults/slow_disk.py) while an idempotent acks=all producer runs; the checkers
(tests/faults/checkers.py) must find nothing acknowledged lost and no duplicates."""

from __future__ import annotations

import pytest

from tests.faults import campaign
from tests.faults.nemesis import NEMESES
from tests.faults.test_faults_quick import assert_clean

pytestmark = pytest.mark.slow


def test_a_slow_leader_disk_loses_nothing(slow_disk_cluster):
    result = campaign.run_producer(slow_disk_cluster, NEMESES["slow-disk-leader"], 31)
    faults = [str(op.value) for op in result.history.faults() if op.type == "ok"]
    assert any(" ms fsync " in f for f in faults), faults  # the disk was slowed, not skipped
    assert_clean(result)
