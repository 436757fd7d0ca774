"""Quick variants of the fault campaign (fixed seeds, one fault of a few seconds each):
a workload runs against broker processes and ZooKeeper while a nemesis strikes once, then
the checkers read the history (tests/faults/checkers.py). The soak with more runs, seeds
and nemeses is `python -m bench.bench_faults`; what it found is docs/faults.md."""

from __future__ import annotations

import pytest

from tests.faults import campaign
from tests.faults.nemesis import NEMESES, ClockSkew, DiskFull, Partition

pytestmark = pytest.mark.slow


def explain(result) -> str:
    faults = [(op.type, op.f, op.value) for op in result.history.faults()]
    return f"{[str(a) for a in result.anomalies[:10]]}; faults {faults}; notes {result.notes}"


def assert_clean(result) -> None:
    assert result.faults >= 1, explain(result)
    assert result.operations > 0
    assert result.anomalies == [], explain(result)
    assert not [n for n in result.notes if n.startswith("not settled")], explain(result)


@pytest.mark.parametrize(
    "nemesis, seed",
    [("pause-leader", 11), ("kill-controller", 12)],
)
def test_acknowledged_writes_survive(fault_cluster, nemesis, seed):
    assert_clean(campaign.run_producer(fault_cluster, NEMESES[nemesis], seed))


def test_lost_unflushed_writes_of_a_leader(fault_cluster):
    """A power cut of the leader of partition 0: its followers lead, it comes back as one."""
    assert_clean(campaign.run_producer(fault_cluster, NEMESES["lose-unflushed-leader"], 14))


def test_lost_unflushed_writes_of_the_controller(fault_cluster):
    """A power cut of the controller, which leads partitions too: it restarts and
    registers again as its old session ends, when another broker takes over. The new
    controller must not leave it the leaderships it had (docs/faults.md, F1: followers
    truncated to its emptied log)."""
    result = campaign.run_producer(fault_cluster, NEMESES["lose-unflushed-controller"], 15)
    assert "(the controller)" in " ".join(str(op.value) for op in result.history.faults())
    assert_clean(result)


def test_group_members_never_share_a_partition(fault_cluster):
    assert_clean(campaign.run_group(fault_cluster, NEMESES["kill-coordinator"], 21))


def test_disk_full_leader_loses_nothing_acknowledged(disk_cluster):
    """The leader's log directory fills up and goes offline (docs/faults.md, F5): nothing
    acknowledged is lost."""
    cluster, dirs = disk_cluster
    result = campaign.run_producer(
        cluster, DiskFull("leader"), 31, env_extra={"fill_dirs": dirs}, fault_s=3.0
    )
    assert result.anomalies == [], explain(result)


def test_clock_skew_of_the_leader(skewed_cluster):
    cluster, files = skewed_cluster
    result = campaign.run_producer(
        cluster, ClockSkew("leader"), 41, env_extra={"clock_files": files}
    )
    assert_clean(result)


def test_leader_cut_off_in_a_minority(netns_cluster):
    cluster, network = netns_cluster
    result = campaign.run_producer(
        cluster, Partition("leader-minority"), 51, env_extra={"network": network}, fault_s=8.0
    )
    assert_clean(result)
