"""Quick variants of the fault campaign (fixed seeds, one fault of a few seconds each):
a workload runs against broker processes and ZooKeeper while a nemesis strikes once, then
the checkers read the history (tests/faults/checkers.py). The soak with more runs, seeds
and nemeses is `python -m bench.bench_faults`; what it found is docs/faults.md."""

from __future__ import annotations

import pytest

from tests.faults import campaign
from tests.faults.nemesis import NEMESES, ClockSkew, DiskFull, Partition
from tests.helpers.cluster import wait_for

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
    [("pause-leader", 11), ("kill-controller", 12), ("kill-zookeeper", 13)],
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


class DiskFullThenRestart(DiskFull):
    """DiskFull whose heal is what an operator does: the filled log directory went offline
    (KAFKA_STORAGE_ERROR; the controller moves its leaderships away; a broker whose only
    log dir failed shuts down, as Kafka's does) and comes back only when its broker starts
    again; so the heal waits until the leadership of partition 0 left the broker, frees
    the space and restarts it. Without the restart the topic never gets back in sync and
    the campaign's settle waits out its 90 s."""

    def __init__(self) -> None:
        super().__init__("leader")
        self.moved_to: int | None = None

    def heal(self, env, undo):
        broker = int(undo[0].removeprefix("broker-"))

        def elsewhere():  # the state, not the new leader's id (broker 0 is falsy)
            state = env._state()
            return state if state is not None and state[0] not in (-1, broker) else None

        try:
            state = wait_for(elsewhere, f"{env.topic}-0 led off full broker {broker}")
            self.moved_to = state[0]
        finally:
            super().heal(env, undo)
            env.cluster.restart(broker)


def test_disk_full_leader_loses_nothing_acknowledged(disk_cluster):
    """The leader's log directory fills up and goes offline (docs/faults.md, F5): its
    leadership moves to another broker, nothing acknowledged is lost, and after the space
    is freed and the broker restarted the topic is fully in sync again."""
    cluster, dirs = disk_cluster
    nemesis = DiskFullThenRestart()
    result = campaign.run_producer(cluster, nemesis, 31, env_extra={"fill_dirs": dirs}, fault_s=3.0)
    assert nemesis.moved_to is not None, explain(result)
    assert_clean(result)


def test_clock_skew_of_the_leader(skewed_cluster):
    cluster, files = skewed_cluster
    result = campaign.run_producer(
        cluster, ClockSkew("leader"), 41, env_extra={"clock_files": files}
    )
    assert_clean(result)


@pytest.mark.parametrize("kind, seed", [("leader-minority", 51), ("leader-one-way", 52)])
def test_leader_cut_off(netns_cluster, kind, seed):
    """Two-way: the leader alone on one side. One-way: what the leader sends is lost, what
    it is sent arrives (its ZooKeeper session ends; it still hears its followers)."""
    cluster, network = netns_cluster
    result = campaign.run_producer(
        cluster, Partition(kind), seed, env_extra={"network": network}, fault_s=8.0
    )
    assert_clean(result)
