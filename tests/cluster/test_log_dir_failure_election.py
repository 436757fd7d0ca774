"""The controller's decision for a replica in a failed log dir (its broker lives on):
broker/controller/election.py `replica_offline` (docs/contracts/cluster.md, "Log
directory failure")."""

from __future__ import annotations

from broker.cluster import LeaderAndIsr
from broker.controller.election import replica_offline
from broker.zk import layout as z

LIVE = {0, 1, 2}


def test_the_leader_in_a_failed_dir_hands_over_to_the_next_in_sync_replica():
    state = LeaderAndIsr(0, 4, (0, 1, 2), 1, 7)
    new = replica_offline([0, 1, 2], state, 0, LIVE, 2, unclean=False)
    assert (new.leader, new.leader_epoch, new.isr) == (1, 5, (1, 2))


def test_a_follower_in_a_failed_dir_leaves_the_isr():
    state = LeaderAndIsr(1, 4, (0, 1, 2), 1, 7)
    new = replica_offline([0, 1, 2], state, 0, LIVE, 2, unclean=False)
    assert (new.leader, new.isr) == (1, (1, 2))
    assert replica_offline([0, 1, 2], new, 0, LIVE, 2, unclean=False) is None


def test_the_only_in_sync_replica_in_a_failed_dir_leaves_the_partition_offline():
    state = LeaderAndIsr(0, 4, (0,), 1, 7)
    new = replica_offline([0, 1, 2], state, 0, LIVE, 2, unclean=False)
    assert new.leader == -1 and new.isr == (0,)  # it returns clean when broker 0 restarts
    unclean = replica_offline([0, 1, 2], state, 0, LIVE, 2, unclean=True)
    assert unclean.leader == 1


def test_the_notification_is_kafkas():
    data = z.encode_log_dir_event(3)
    assert z.decode_log_dir_event(data) == 3
    assert b'"event":1' in data.replace(b" ", b"")
