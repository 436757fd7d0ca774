"""The controller's decisions that read its context alone: which asked-for elections are
held, what the automatic rebalance moves, what a stopping broker still leads, when a
deleted topic's znodes may go, which brokers a controller taking over finds restarted."""

from __future__ import annotations

from dataclasses import replace

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


def test_a_broker_registered_after_a_state_naming_it_was_written_restarted():
    ctx = _ctx()
    # The states' last writes: t-0 at zxid 50, t-1 at 60, t-2 (led by 1 alone) at 40.
    for tp, zxid in {("t", 0): 50, ("t", 1): 60, ("t", 2): 40}.items():
        ctx.states[tp] = replace(ctx.states[tp], zxid=zxid)

    def registered(**epochs: int) -> None:
        ctx.live = {
            int(b[1:]): BrokerRegistration(int(b[1:]), (), epoch=e) for b, e in epochs.items()
        }

    registered(b0=10, b1=30, b2=20)  # every registration before every decision
    assert leadership.restarted_since_decided(ctx) == set()
    registered(b0=10, b1=45, b2=20)  # 1 restarted after t-2's leadership (40) was decided
    assert leadership.restarted_since_decided(ctx) == {1}
    registered(b0=55, b1=30, b2=20)  # 0, a follower in t-0's ISR (50), restarted after it
    assert leadership.restarted_since_decided(ctx) == {0}
    registered(b0=61, b2=61)  # after every write; 1 is not registered (it died)
    assert leadership.restarted_since_decided(ctx) == {0, 2}
    # A state of unknown zxid (not read from the store) names nobody.
    ctx.states = {tp: replace(state, zxid=-1) for tp, state in ctx.states.items()}
    assert leadership.restarted_since_decided(ctx) == set()
