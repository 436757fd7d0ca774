"""Leader and ISR decisions, case by case."""

from __future__ import annotations

import pytest

from broker.cluster import LeaderAndIsr
from broker.controller import election as e

S = LeaderAndIsr  # (leader, leader_epoch, isr, controller_epoch)


def test_new_partition_first_live_replica_leads_all_live_in_sync():
    assert e.new_partition([3, 1, 2], {1, 2, 3}, 7) == S(3, 0, (3, 1, 2), 7)
    assert e.new_partition([3, 1, 2], {1, 2}, 7) == S(1, 0, (1, 2), 7)
    with pytest.raises(e.NoEligibleLeader):
        e.new_partition([3], {1}, 7)


@pytest.mark.parametrize(
    ("isr", "live", "unclean", "expected", "was_unclean"),
    [
        ((1, 2, 3), {2, 3}, False, S(2, 6, (2, 3), 9), False),  # assignment order wins
        ((1, 3), {2, 3}, False, S(3, 6, (3,), 9), False),  # only ISR members may lead
        ((1,), {2, 3}, True, S(2, 6, (2,), 9), True),  # unclean: any live replica
        ((1,), {2, 3}, False, None, False),  # clean: offline
        ((1, 2, 3), set(), True, None, False),  # nobody alive
    ],
)
def test_offline_partition(isr, live, unclean, expected, was_unclean):
    current = S(1, 5, isr, 8, zk_version=4)
    if expected is None:
        with pytest.raises(e.NoEligibleLeader):
            e.offline_partition([1, 2, 3], current, live, 9, unclean)
        return
    got, unclean_used = e.offline_partition([1, 2, 3], current, live, 9, unclean)
    assert (got, unclean_used) == (expected, was_unclean)
    assert got.zk_version == 4  # written conditionally on the version read


def test_controlled_shutdown_moves_leadership_and_drops_the_stopping_broker():
    current = S(1, 5, (1, 2, 3), 8)
    assert e.controlled_shutdown([1, 2, 3], current, {1, 2, 3}, {1}, 9) == S(2, 6, (2, 3), 9)
    with pytest.raises(e.NoEligibleLeader):
        e.controlled_shutdown([1, 2], S(1, 5, (1,), 8), {1, 2}, {1}, 9)


def test_followers_leave_the_isr_but_never_empty_it():
    assert e.without_replicas(S(1, 5, (1, 2, 3), 8), {3}, 9) == S(1, 6, (1, 2), 9)
    assert e.without_replicas(S(1, 5, (1, 2), 8), {3}, 9) is None
    assert e.without_replicas(S(1, 5, (1,), 8), {1}, 9) is None


def test_a_partition_without_an_eligible_leader_keeps_its_isr():
    assert e.leader_lost(S(1, 5, (1,), 8), 9) == S(-1, 6, (1,), 9)


def test_preferred_replica():
    assert e.preferred_replica([1, 2], S(2, 5, (1, 2), 8), {1, 2}, 9) == S(1, 6, (1, 2), 9)
    assert e.preferred_replica([1, 2], S(1, 5, (1, 2), 8), {1, 2}, 9) is None
    assert e.preferred_replica([1, 2], S(2, 5, (2,), 8), {1, 2}, 9) is None


def test_replicas_moved_keeps_a_live_leader_that_stays_a_replica():
    # A move starts: the replicas grow (target first), nobody leaves yet.
    started = e.replicas_moved([2, 3, 0, 1], [], S(0, 0, (0, 1), 1, zk_version=3), {0, 1, 2, 3}, 4)
    assert started == S(0, 1, (0, 1), 4) and started.zk_version == 3
    # Leaving replicas drop out of the ISR; the leader stays in the target.
    assert e.replicas_moved([1, 2], [0], S(1, 3, (0, 1, 2), 1), {0, 1, 2}, 4) == S(1, 4, (1, 2), 4)


def test_replicas_moved_elects_in_the_target_when_the_leader_leaves_or_is_down():
    # The move finishes: the leader leaves, the first live in-sync target replica leads.
    done = e.replicas_moved([2, 3], [0, 1], S(0, 1, (0, 1, 2, 3), 1), {0, 1, 2, 3}, 4)
    assert done == S(2, 2, (2, 3), 4)
    # A leader that stays a replica but is down is replaced too.
    assert e.replicas_moved([1, 2], [], S(1, 3, (1, 2), 1), {2}, 4) == S(2, 4, (1, 2), 4)


def test_replicas_moved_without_an_eligible_leader_is_offline_and_keeps_an_isr():
    # Nobody of the target is in sync: offline, and the ISR never empties (the leaving
    # leader stays named in it, so the state still says who had everything).
    assert e.replicas_moved([2, 3], [0], S(0, 3, (0,), 1), {0, 2, 3}, 4) == S(-1, 4, (0,), 4)
