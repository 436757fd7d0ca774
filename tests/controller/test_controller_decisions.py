"""The controller's decisions that read its context alone: which asked-for elections are
held, what the automatic rebalance moves, what a stopping broker still leads, when a
deleted topic's znodes may go."""

from __future__ import annotations

from broker.cluster import BrokerRegistration, LeaderAndIsr
from broker.controller import deletion, leadership, shutdown
from broker.controller.context import ControllerContext
from broker.protocol.errors import ErrorCode


def _ctx(live=(0, 1, 2)) -> ControllerContext:
    ctx = ControllerContext(0, "PLAINTEXT", 1, 0)
    ctx.live = {b: BrokerRegistration(b, ()) for b in live}
    ctx.assignments = {"t": {0: [1, 2, 0], 1: [2, 0, 1], 2: [1]}}
    ctx.states = {
        ("t", 0): LeaderAndIsr(2, 1, (2, 0, 1), 1),
        ("t", 1): LeaderAndIsr(2, 0, (2, 0, 1), 1),
        ("t", 2): LeaderAndIsr(1, 0, (1,), 1),
    }
    return ctx


def test_which_asked_for_elections_are_held():
    ctx = _ctx()
    assert leadership.election_refused(ctx, ("t", 0), unclean=False) is None
    assert leadership.election_refused(ctx, ("t", 1), False) == ErrorCode.ELECTION_NOT_NEEDED
    assert leadership.election_refused(ctx, ("t", 0), True) == ErrorCode.ELECTION_NOT_NEEDED
    assert leadership.election_refused(ctx, ("t", 9), False) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    ctx.deleting = {"t"}
    assert leadership.election_refused(ctx, ("t", 0), False) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )


def test_the_automatic_rebalance_moves_a_broker_past_the_imbalance():
    ctx = _ctx()
    # Broker 1 prefers t-0 and t-2 and leads t-2 only: 50 % not led.
    assert leadership.imbalanced(ctx, 10) == [("t", 0)]
    assert leadership.imbalanced(ctx, 50) == []
    ctx.shutting_down = {1}
    assert leadership.imbalanced(ctx, 10) == []


def test_what_a_stopping_broker_still_leads():
    ctx = _ctx()
    # t-0 and t-1 are led by 2 with live followers; t-2 has no other replica.
    assert shutdown.still_led(ctx, 2) == [("t", 0), ("t", 1)]
    assert shutdown.still_led(ctx, 1) == []
    ctx.shutting_down = {0, 1}
    assert shutdown.still_led(ctx, 2) == []


def test_a_deleted_topic_goes_once_every_holder_deleted_its_replica():
    ctx = _ctx()
    ctx.deleted_replicas = {("t", 0), ("t", 1)}
    assert not deletion.every_replica_deleted(ctx, "t")
    ctx.deleted_replicas.add(("t", 2))
    assert deletion.every_replica_deleted(ctx, "t")
