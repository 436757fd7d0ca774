"""A reassignment's checks and arithmetic (broker/controller/reassignment.py), directly."""

from __future__ import annotations

import pytest

from broker.cluster import LeaderAndIsr
from broker.controller import reassignment as r
from broker.controller.context import ControllerContext
from broker.zk.layout import Reassignment


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ([], "Empty replica list"),
        ([1, 2, 1], "Duplicate replica ids in partition reassignment replica list: [1]."),
        ([1, 7, 8], "non-existent brokers [7, 8] (registered: [0, 1, 2])."),
    ],
)
def test_target_problems(target, problem):
    assert problem in r.target_problem(target, {0, 1, 2})


def test_a_good_target_has_no_problem():
    assert r.target_problem([2, 0], {0, 1, 2}) is None


def test_complete_when_every_target_replica_is_in_sync():
    moving = Reassignment.between([0, 1], [2, 3])
    assert r.is_complete(moving, LeaderAndIsr(0, 1, (0, 1, 2, 3), 1))
    assert r.is_complete(moving, LeaderAndIsr(2, 1, (3, 2), 1))
    assert not r.is_complete(moving, LeaderAndIsr(0, 1, (0, 1, 2), 1))
    assert not r.is_complete(moving, None)


def test_a_new_move_goes_from_the_current_replicas():
    moving = r.redirect([0, 1], None, [1, 2])
    assert (moving.target, moving.adding, moving.removing) == ((1, 2), (2,), (0,))
    assert moving.replicas == [1, 2, 0]
    # The original replicas as a set: their order is the move's (target first), not the
    # order they had (Reassignment keeps target, adding and removing only).
    assert sorted(moving.original) == [0, 1]


def test_a_redirected_move_starts_again_from_the_original_replicas():
    ongoing = Reassignment.between([0, 1], [2, 3])
    moving = r.redirect(ongoing.replicas, ongoing, [3, 4])
    # 2, added by the first target and not wanted by this one, is no replica any more.
    assert moving == Reassignment((3, 4), (3, 4), (0, 1))
    assert 2 not in moving.replicas


def test_a_move_back_to_the_original_replicas_moves_nothing():
    ongoing = Reassignment.between([0, 1], [2, 3])
    back = r.redirect(ongoing.replicas, ongoing, ongoing.original)
    assert (back.adding, back.removing) == ((), ())


def test_the_moves_under_way_as_listed():
    ctx = ControllerContext(0, "PLAINTEXT", 1, 0)
    ctx.assignments = {"t": {0: [2, 3, 0, 1], 1: [1, 0]}}
    ctx.reassigning = {("t", 0): Reassignment.between([0, 1], [2, 3])}
    listed = {("t", 0): ([2, 3, 0, 1], [2, 3], [0, 1])}
    assert r.under_way(ctx, None) == listed
    assert r.under_way(ctx, [("t", 0), ("t", 1), ("nope", 0)]) == listed
    assert r.under_way(ctx, [("t", 1)]) == {}
