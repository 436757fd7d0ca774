"""The transaction state table: every allowed move, every refused one, the pending rule."""

from __future__ import annotations

import itertools

import pytest

from broker.transactions.state import (
    TRANSITIONS,
    IllegalStateTransition,
    TxnMetadata,
    TxnState,
    is_epoch_exhausted,
)

S = TxnState
ALL_MOVES = list(itertools.product(TxnState, TxnState))


def meta(state: TxnState, epoch: int = 3) -> TxnMetadata:
    return TxnMetadata("tx", 7, producer_epoch=epoch, state=state, update_ms=100)


def test_the_table_is_kafkas():
    assert TRANSITIONS == {
        S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    }
    # Kafka's status bytes and names
    assert [(s.value, s.kafka_name) for s in TxnState] == [
        (0, "Empty"),
        (1, "Ongoing"),
        (2, "PrepareCommit"),
        (3, "PrepareAbort"),
        (4, "CompleteCommit"),
        (5, "CompleteAbort"),
        (6, "Dead"),
        (7, "PrepareEpochFence"),
    ]


@pytest.mark.parametrize(("source", "target"), ALL_MOVES, ids=lambda s: s.kafka_name)
def test_every_move(source, target):
    m = meta(source)
    if source in TRANSITIONS[target]:
        transit = m.prepare_transition(target, update_ms=200)
        assert (transit.state, m.pending, m.state) == (target, target, source)
    else:
        with pytest.raises(IllegalStateTransition, match="not a move"):
            m.prepare_transition(target, update_ms=200)
        assert m.pending is None


def test_one_pending_change_at_a_time():
    m = meta(S.EMPTY)
    transit = m.prepare_add_partitions(frozenset({("t", 0)}), 200)
    with pytest.raises(IllegalStateTransition, match="still pending"):
        m.prepare_add_partitions(frozenset({("t", 1)}), 201)
    assert m.state == S.EMPTY and not m.partitions  # nothing applies before the write
    m.complete(transit)
    assert (m.state, m.partitions, m.start_ms, m.update_ms, m.pending) == (
        S.ONGOING,
        {("t", 0)},
        200,
        200,
        None,
    )


def test_a_failed_write_leaves_the_metadata_as_it_was():
    m = meta(S.ONGOING)
    m.partitions = {("t", 0)}
    m.prepare_end(True, 200)
    m.abandon_pending()
    assert (m.state, m.pending) == (S.ONGOING, None)
    m.prepare_end(False, 201)  # a new change may start


def test_completing_what_is_not_pending_raises():
    m = meta(S.ONGOING)
    transit = m.prepare_end(True, 200)
    m.abandon_pending()
    with pytest.raises(IllegalStateTransition, match="nothing is pending"):
        m.complete(transit)


def test_epoch_bump_kip_360():
    m = meta(S.COMPLETE_COMMIT, epoch=3)
    t = m.prepare_epoch_bump(60000, None, 200)
    assert (t.producer_epoch, t.last_producer_epoch, t.partitions, t.start_ms) == (
        4,
        -1,
        frozenset(),
        -1,
    )
    m.complete(t)
    # the producer that had epoch 4 recovers: 5, remembering 4
    t = m.prepare_epoch_bump(60000, 4, 300)
    assert (t.producer_epoch, t.last_producer_epoch) == (5, 4)
    m.complete(t)
    # its retry (it never saw the answer) gets the same epoch again
    m.abandon_pending()
    t = m.prepare_epoch_bump(60000, 4, 301)
    assert (t.producer_epoch, t.last_producer_epoch) == (5, 4)
    m.abandon_pending()
    # any other epoch is a fenced producer
    assert m.prepare_epoch_bump(60000, 2, 302) is None
    assert m.pending is None


def test_epoch_fence_bumps_once_even_when_its_write_fails():
    m = meta(S.ONGOING, epoch=3)
    m.partitions = {("t", 0)}
    t = m.prepare_epoch_fence(200)
    assert (t.state, t.producer_epoch, m.producer_epoch, m.pending) == (
        S.PREPARE_ABORT,
        4,
        4,
        S.PREPARE_ABORT,
    )
    m.abandon_pending()
    assert m.failed_epoch_fence and m.state == S.ONGOING
    t = m.prepare_epoch_fence(300)
    assert t.producer_epoch == 4  # not 5: the client never saw 4
    m.complete(t)
    m.prepare_complete(400)
    assert not m.failed_epoch_fence


def test_epochs_are_exhausted_one_short_of_the_maximum():
    assert not is_epoch_exhausted(32765)
    assert is_epoch_exhausted(32766)
    m = meta(S.EMPTY, epoch=32766)
    with pytest.raises(IllegalStateTransition, match="exhausted"):
        m.prepare_epoch_bump(60000, None, 200)
    t = m.prepare_producer_id_rotation(8, 60000, 200, record_last_epoch=True)
    assert (t.producer_id, t.last_producer_id, t.producer_epoch, t.last_producer_epoch) == (
        8,
        7,
        0,
        32766,
    )


def test_markers_remove_partitions_only_while_preparing():
    m = meta(S.ONGOING)
    m.partitions = {("t", 0)}
    with pytest.raises(IllegalStateTransition):
        m.remove_partition(("t", 0))
    m.complete(m.prepare_end(True, 200))
    m.remove_partition(("t", 0))
    assert not m.partitions
