"""KIP-890 part 2 (transaction version 2) in the coordinator's decisions, without sockets:
a partition added by a Produce v12's leader, the epoch bump at every EndTxn v5, its
retries and fencing, the epoch overflow onto a new producer id, the state records that
carry it through a failover, the leader's AddPartitionsToTxn v5 question, and a
TxnOffsetCommit v5's add of the group's offsets partition (its markers, what the commit
answers when the add fails). Against a broker process: test_transactional_clients.py
(raw requests at Produce v12/TxnOffsetCommit v5/EndTxn v5)."""

from __future__ import annotations

import pytest

from broker.coordinator.offsets_topic import OFFSETS_TOPIC
from broker.protocol.errors import ErrorCode as E
from broker.transactions.coordinator import (
    AddPartitionsRequest,
    EndTxnRequest,
    abort_timed_out,
    add_partitions,
    begin_loading,
    end_txn,
    load_partition,
    markers_answered,
    record_written,
)
from broker.transactions.state import INT16_MAX, TxnMetadata, TxnState
from broker.transactions.state_topic import decode_value, encode_record
from broker.transactions.verification import (
    VerificationQueue,
    coordinator_code,
    offset_commit_error,
    request_body,
    request_version,
)
from tests.transactions.test_coordinator import T0, TX, Ids, P, coord, meta_of, replicate

S = TxnState
__all__ = ["coord"]  # the fixture, shared with test_coordinator


def _tv2_ongoing(state, epoch=5) -> TxnMetadata:
    """An id at `epoch` whose transaction a Produce v12 opened (AddPartitionsToTxn v5)."""
    m = TxnMetadata(TX, 7, 7, epoch, -1, 60000, S.COMPLETE_COMMIT, set(), -1, 0)
    state.partitions[P].transactions[TX] = m
    add = AddPartitionsRequest(TX, 7, epoch, frozenset({T0}), client_tv=2)
    assert replicate(state, add_partitions(state, add, 10), 10).error == E.NONE
    assert (m.state, m.client_tv) == (S.ONGOING, 2)
    return m


def _end(state, epoch, commit=True, pid=7, tv=2, ids=None, now=50):
    return end_txn(state, EndTxnRequest(TX, pid, epoch, commit, tv), now, ids or Ids())


def _complete(state, answer):
    """The leaders wrote every marker: the completion record is replicated."""
    errors = dict.fromkeys(answer.markers.partitions, E.NONE)
    progress = markers_answered(state, answer.markers, errors)
    assert progress.write is not None
    return replicate(state, progress, 70)


@pytest.mark.parametrize("commit", [True, False])
def test_end_bumps_the_epoch_and_markers_carry_it(coord, commit):
    m = _tv2_ongoing(coord)
    d = _end(coord, 5, commit)
    transit = d.write.transit
    assert (transit.producer_epoch, transit.last_producer_epoch, transit.client_tv) == (6, 5, 2)
    answer = replicate(coord, d, 60)
    assert (answer.error, answer.producer_id, answer.producer_epoch) == (E.NONE, 7, 6)
    assert (answer.markers.producer_id, answer.markers.producer_epoch) == (7, 6)
    # A retry with the epoch before the bump while the markers go out, then after.
    assert _end(coord, 5, commit).error == E.CONCURRENT_TRANSACTIONS
    assert _complete(coord, answer).error == E.NONE
    assert (m.state, m.producer_id, m.producer_epoch) == (
        S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT,
        7,
        6,
    )
    retry = _end(coord, 5, commit)
    assert (retry.error, retry.producer_id, retry.producer_epoch, retry.write) == (
        E.NONE,
        7,
        6,
        None,
    )
    # The other result is no retry of this end.
    assert _end(coord, 5, not commit).error == E.INVALID_TXN_STATE
    # The new epoch has nothing to end; older epochs are fenced.
    assert _end(coord, 6, commit).error == E.PRODUCER_FENCED
    assert _end(coord, 4, commit).error == E.PRODUCER_FENCED
    # The next transaction goes on at the bumped epoch, and ends at the next one.
    add = AddPartitionsRequest(TX, 7, 6, frozenset({T0}), client_tv=2)
    assert replicate(coord, add_partitions(coord, add, 80), 80).error == E.NONE
    assert _end(coord, 5, commit).error == E.PRODUCER_FENCED
    assert replicate(coord, _end(coord, 6, commit), 90).producer_epoch == 7


def test_an_old_client_end_keeps_the_epoch(coord):
    m = _tv2_ongoing(coord)
    answer = replicate(coord, _end(coord, 5, tv=0), 60)
    assert answer.markers.producer_epoch == 5
    _complete(coord, answer)
    assert (m.producer_epoch, m.client_tv) == (5, 0)
    assert _end(coord, 5, tv=0).error == E.NONE  # Kafka's retry before version 2


def test_the_last_epoch_moves_the_producer_to_a_new_id(coord):
    m = _tv2_ongoing(coord, epoch=INT16_MAX - 1)
    d = _end(coord, INT16_MAX - 1, ids=Ids(100))
    assert (d.write.transit.producer_epoch, d.write.transit.next_producer_id) == (INT16_MAX, 100)
    answer = replicate(coord, d, 60)
    # Told the id and epoch it goes on with; the markers fence the last epoch of the old id.
    assert (answer.producer_id, answer.producer_epoch) == (100, 0)
    assert (answer.markers.producer_id, answer.markers.producer_epoch) == (7, INT16_MAX)
    _complete(coord, answer)
    assert (m.producer_id, m.producer_epoch, m.last_producer_id) == (100, 0, 7)
    retry = _end(coord, INT16_MAX - 1)  # the old id's retry, answered as the first
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, 100, 0)
    assert _end(coord, INT16_MAX).error == E.INVALID_PRODUCER_ID_MAPPING  # 7 at 32767
    assert _end(coord, 0, pid=100).error == E.PRODUCER_FENCED  # nothing open


def test_a_fenced_producer_retrying_its_end_stays_fenced(coord):
    """The transaction timed out and was aborted under a bumped epoch: the producer's
    own end, at its epoch, is no retry of that abort."""
    m = _tv2_ongoing(coord)
    abort = replicate(coord, abort_timed_out(coord, TX, 7, 100), 100)
    _complete(coord, abort)
    assert (m.state, m.producer_epoch) == (S.COMPLETE_ABORT, 6)
    assert _end(coord, 5, commit=False).error == E.PRODUCER_FENCED
    assert _end(coord, 5, commit=True).error == E.PRODUCER_FENCED


def test_a_new_coordinator_completes_a_bumped_end(coord):
    """The prepared record (v1, with the next producer id and the client's version) is
    all a new coordinator has: it sends the markers at the bumped epoch and completes
    onto the new producer id."""
    _tv2_ongoing(coord, epoch=INT16_MAX - 1)
    d = _end(coord, INT16_MAX - 1, ids=Ids(100))
    key, value = encode_record(d.write.record)
    assert value[:2] == b"\x00\x01"  # value version 1: the tagged fields
    loaded = decode_value(value)
    assert (loaded.next_producer_id, loaded.client_tv) == (100, 2)
    begin_loading(coord, P)
    (send,) = load_partition(coord, P, 4, [(key, value)], 200)
    assert (send.producer_id, send.producer_epoch, send.completion.producer_id) == (
        7,
        INT16_MAX,
        100,
    )
    progress = markers_answered(coord, send, {T0: E.NONE})
    assert replicate(coord, progress).error == E.NONE
    assert (meta_of(coord).producer_id, meta_of(coord).producer_epoch) == (100, 0)


def test_a_failed_write_leaves_the_epoch(coord):
    m = _tv2_ongoing(coord)
    d = _end(coord, 5)
    assert record_written(coord, d.write, E.NOT_ENOUGH_REPLICAS, 60).error == (
        E.COORDINATOR_NOT_AVAILABLE
    )
    assert (m.state, m.producer_epoch, m.pending) == (S.ONGOING, 5, None)
    assert replicate(coord, _end(coord, 5), 70).producer_epoch == 6


def test_the_leader_asks_to_add_for_a_v12_produce():
    queue = VerificationQueue()
    queue.add(1, "a", 7, 5, frozenset({T0}), lambda errors: None)
    ((_, body, _),) = queue.take()
    assert (request_version(body), body["transactions"][0]["verify_only"]) == (4, True)
    queue.answered(1, {}, None)
    queue.add(1, "a", 7, 5, frozenset({T0}), lambda errors: None, add=True)
    queue.add(1, "a", 7, 5, frozenset({("t", 1)}), lambda errors: None)  # joins, adds too
    ((_, body, sent),) = queue.take()
    assert (request_version(body), body["transactions"][0]["verify_only"]) == (5, False)
    assert body == request_body(sent)


def test_a_v5_offset_commit_adds_the_offsets_partition_and_gets_its_marker(coord):
    """TxnOffsetCommit v5 alone (no AddOffsetsToTxn): the broker's add opens the
    transaction at the group's offsets partition, so EndTxn v5's marker reaches it."""
    m = TxnMetadata(TX, 7, 7, 5, -1, 60000, S.COMPLETE_COMMIT, set(), -1, 0)
    coord.partitions[P].transactions[TX] = m
    offsets = (OFFSETS_TOPIC, 1)
    add = AddPartitionsRequest(TX, 7, 5, frozenset({offsets}), client_tv=2)
    assert replicate(coord, add_partitions(coord, add, 10), 10).error == E.NONE
    assert (m.state, m.partitions, m.client_tv) == (S.ONGOING, {offsets}, 2)
    answer = replicate(coord, _end(coord, 5), 60)
    assert answer.markers.partitions == frozenset({offsets})
    assert answer.markers.producer_epoch == 6
    # A commit of the ended transaction's epoch is fenced at the add.
    late = AddPartitionsRequest(TX, 7, 5, frozenset({offsets}), client_tv=2)
    assert coordinator_code(add_partitions(coord, late, 80).error) == E.INVALID_PRODUCER_EPOCH


@pytest.mark.parametrize(
    ("failed", "version", "answered"),
    [
        # No answer from the coordinator: retried as a loading coordinator (no lookup).
        (E.NETWORK_EXCEPTION, 5, E.COORDINATOR_LOAD_IN_PROGRESS),
        (E.NOT_ENOUGH_REPLICAS, 5, E.COORDINATOR_NOT_AVAILABLE),
        (E.UNKNOWN_TOPIC_OR_PARTITION, 5, E.COORDINATOR_NOT_AVAILABLE),
        (E.NOT_LEADER_OR_FOLLOWER, 5, E.NOT_COORDINATOR),
        # The coordinator's own answers reach the producer as they are.
        (E.COORDINATOR_NOT_AVAILABLE, 5, E.COORDINATOR_NOT_AVAILABLE),
        (E.CONCURRENT_TRANSACTIONS, 5, E.CONCURRENT_TRANSACTIONS),
        (E.INVALID_PRODUCER_EPOCH, 5, E.INVALID_PRODUCER_EPOCH),
        (E.INVALID_PRODUCER_ID_MAPPING, 5, E.INVALID_PRODUCER_ID_MAPPING),
        (E.TRANSACTION_ABORTABLE, 5, E.TRANSACTION_ABORTABLE),
        (E.TRANSACTION_ABORTABLE, 4, E.TRANSACTION_ABORTABLE),
        # Not known below v4 (KIP-890).
        (E.TRANSACTION_ABORTABLE, 3, E.INVALID_TXN_STATE),
    ],
)
def test_what_a_txn_offset_commit_answers_when_the_add_failed(failed, version, answered):
    assert offset_commit_error(failed, version) == answered
