"""The transaction coordinator's decisions: each API in each state, writes, markers,
timeouts, expiry and the loading of a state partition. No broker: the caller's part
(appending, replicating, sending markers) is played by the test."""

from __future__ import annotations

import itertools

import pytest

from broker.coordinator.offsets_topic import partition_for as offsets_partition
from broker.protocol.errors import ErrorCode as E
from broker.transactions.coordinator import (
    AddOffsetsRequest,
    AddPartitionsRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    SendMarkers,
    TxnConfig,
    TxnCoordinatorState,
    WriteState,
    abort_timed_out,
    add_offsets,
    add_partitions,
    begin_loading,
    end_txn,
    expire_transactional_ids,
    for_version,
    init_producer_id,
    load_partition,
    marker_requests,
    markers_answered,
    record_written,
    timed_out,
    unload_partition,
)
from broker.transactions.state import TxnMetadata, TxnState, TxnTransit
from broker.transactions.state_topic import (
    TxnRecord,
    decode_record,
    encode_record,
    partition_for,
)

S = TxnState
TX = "tx-1"
CONFIG = TxnConfig(max_timeout_ms=900000, id_expiration_ms=1000, state_partitions=4)
P = partition_for(TX, 4)
T0 = ("t", 0)


@pytest.fixture
def coord() -> TxnCoordinatorState:
    state = TxnCoordinatorState(CONFIG)
    begin_loading(state, P)
    load_partition(state, P, coordinator_epoch=3, records=[], now_ms=0)
    return state


class Ids:
    def __init__(self, start: int = 100) -> None:
        self.ids = itertools.count(start)

    def __call__(self) -> int:
        return next(self.ids)


def replicate(state, decision, now_ms=0, error=E.NONE):
    """The caller's part: the write of a decision (or the write itself) is replicated."""
    write = decision if isinstance(decision, WriteState) else decision.write
    assert write is not None
    return record_written(state, write, error, now_ms)


def init(state, timeout=60000, pid=-1, epoch=-1, ids=None, now=0):
    req = InitProducerIdRequest(TX, timeout, pid, epoch)
    return init_producer_id(state, req, now, ids or Ids())


def meta_of(state) -> TxnMetadata:
    return state.partitions[P].transactions[TX]


def put(state, txn_state, epoch=5, partitions=frozenset({T0}), start=10):
    m = TxnMetadata(TX, 7, 7, epoch, -1, 60000, txn_state, set(partitions), start, start)
    if txn_state == S.EMPTY:
        m.partitions, m.start_ms = set(), -1
    if txn_state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        m.partitions = set()  # the completion cleared them
    state.partitions[P].transactions[TX] = m
    return m


# -- InitProducerId -------------------------------------------------------------------------
def test_init_new_id_then_bump(coord):
    d = init(coord)
    assert (d.error, d.producer_id, d.producer_epoch) == (E.NONE, 100, 0)
    assert d.write.transit.state == S.EMPTY
    assert replicate(coord, d).producer_epoch == 0
    d = init(coord)
    assert (d.producer_id, d.producer_epoch) == (100, 1)


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_init_on_no_open_transaction_bumps_the_epoch(coord, state):
    put(coord, state)
    d = init(coord)
    assert (d.error, d.producer_id, d.producer_epoch) == (E.NONE, 7, 6)
    answer = replicate(coord, d)
    assert (answer.error, answer.producer_epoch) == (E.NONE, 6)
    assert (meta_of(coord).state, meta_of(coord).partitions) == (S.EMPTY, set())


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_init_while_markers_go_out_is_concurrent(coord, state):
    put(coord, state)
    assert init(coord).error == E.CONCURRENT_TRANSACTIONS


def test_init_on_ongoing_aborts_it_fencing_the_old_producer(coord):
    put(coord, S.ONGOING, epoch=5)
    d = init(coord)
    assert d.error == E.CONCURRENT_TRANSACTIONS
    assert (d.write.transit.state, d.write.transit.producer_epoch) == (S.PREPARE_ABORT, 6)
    # the zombie, still at epoch 5, is fenced at once
    assert end_txn(coord, EndTxnRequest(TX, 7, 5, True), 1).error == E.PRODUCER_FENCED
    after = replicate(coord, d)
    assert after.error == E.CONCURRENT_TRANSACTIONS
    assert (after.markers.commit, after.markers.producer_epoch, after.markers.partitions) == (
        False,
        6,
        frozenset({T0}),
    )
    assert init(coord).error == E.CONCURRENT_TRANSACTIONS  # markers still pending
    progress = markers_answered(coord, after.markers, {T0: E.NONE})
    assert progress.write.transit.state == S.COMPLETE_ABORT
    replicate(coord, progress)
    d = init(coord)  # the client's retry
    assert (d.error, d.producer_id, d.producer_epoch) == (E.NONE, 7, 7)


def test_init_pending_is_concurrent(coord):
    put(coord, S.EMPTY)
    init(coord)  # its write not yet replicated
    assert init(coord).error == E.CONCURRENT_TRANSACTIONS


def test_epoch_exhaustion_rotates_the_producer_id(coord):
    put(coord, S.COMPLETE_COMMIT, epoch=32766)
    d = init(coord, ids=Ids(500))
    assert (d.producer_id, d.producer_epoch) == (500, 0)
    assert d.write.transit.last_producer_id == 7


def test_kip_360_recovery(coord):
    put(coord, S.COMPLETE_ABORT, epoch=5)
    assert init(coord, pid=7, epoch=4).error == E.PRODUCER_FENCED
    assert init(coord, pid=99, epoch=5).error == E.PRODUCER_FENCED
    d = init(coord, pid=7, epoch=5)
    assert (d.producer_id, d.producer_epoch, d.write.transit.last_producer_epoch) == (7, 6, 5)
    replicate(coord, d)
    # a retry of that call (answer lost) gets the same epoch
    d = init(coord, pid=7, epoch=5)
    assert (d.error, d.producer_epoch) == (E.NONE, 6)


def test_kip_360_retry_of_a_rotation(coord):
    put(coord, S.COMPLETE_COMMIT, epoch=32766)
    d = init(coord, pid=7, epoch=32766, ids=Ids(500))
    assert (d.producer_id, d.producer_epoch) == (500, 0)
    replicate(coord, d)
    # a retry naming the old, exhausted id gets the same answer again
    d = init(coord, pid=7, epoch=32766, ids=Ids(600))
    assert (d.error, d.producer_id, d.producer_epoch) == (E.NONE, 500, 0)


@pytest.mark.parametrize(
    ("timeout", "pid", "epoch", "error"),
    [
        (0, -1, -1, E.INVALID_TRANSACTION_TIMEOUT),
        (900001, -1, -1, E.INVALID_TRANSACTION_TIMEOUT),
        (60000, 7, -1, E.INVALID_REQUEST),
        (60000, -1, 3, E.INVALID_REQUEST),
    ],
)
def test_init_bad_input_changes_nothing(coord, timeout, pid, epoch, error):
    assert init(coord, timeout, pid, epoch).error == error
    assert TX not in coord.partitions[P].transactions
    assert init_producer_id(coord, InitProducerIdRequest("", 60000), 0, Ids()).error == (
        E.INVALID_REQUEST
    )


def test_coordinator_errors(coord):
    unload_partition(coord, P)
    assert init(coord).error == E.NOT_COORDINATOR
    begin_loading(coord, P)
    assert init(coord).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert end_txn(coord, EndTxnRequest(TX, 7, 5, True), 0).error == (
        E.COORDINATOR_LOAD_IN_PROGRESS
    )


def test_producer_fenced_for_old_versions():
    assert for_version(22, 3, E.PRODUCER_FENCED) == E.INVALID_PRODUCER_EPOCH
    assert for_version(22, 4, E.PRODUCER_FENCED) == E.PRODUCER_FENCED
    assert for_version(26, 1, E.PRODUCER_FENCED) == E.INVALID_PRODUCER_EPOCH
    assert for_version(26, 1, E.INVALID_TXN_STATE) == E.INVALID_TXN_STATE


# -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------
def add(state, parts=frozenset({T0}), pid=7, epoch=5, **kw):
    return add_partitions(state, AddPartitionsRequest(TX, pid, epoch, parts), 50, **kw)


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT, S.ONGOING])
def test_add_partitions_opens_or_extends(coord, state):
    m = put(coord, state, partitions=frozenset({("t", 9)}))
    d = add(coord)
    assert d.write.transit.state == S.ONGOING
    replicate(coord, d)
    assert m.state == S.ONGOING
    if state == S.ONGOING:
        assert (m.partitions, m.start_ms) == ({T0, ("t", 9)}, 10)
    else:
        assert (m.partitions, m.start_ms) == ({T0}, 50)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_add_partitions_while_completing(coord, state):
    put(coord, state)
    assert add(coord).partition_errors == {T0: E.CONCURRENT_TRANSACTIONS}


def test_add_partitions_checks(coord):
    assert add(coord).partition_errors == {T0: E.INVALID_PRODUCER_ID_MAPPING}
    put(coord, S.ONGOING)
    assert add(coord, pid=8).error == E.INVALID_PRODUCER_ID_MAPPING
    assert add(coord, epoch=4).error == E.PRODUCER_FENCED
    d = add(coord)  # already in: answered at once
    assert (d.error, d.write) == (E.NONE, None)
    add(coord, frozenset({("t", 1)}))
    assert add(coord, frozenset({("t", 2)})).error == E.CONCURRENT_TRANSACTIONS


def test_add_partitions_refusals_per_partition(coord):
    put(coord, S.EMPTY)
    parts = frozenset({T0, ("secret", 0), ("t", 99)})
    d = add(
        coord,
        parts,
        partition_exists=lambda tp: tp != ("t", 99),
        topic_authorized=lambda topic: topic != "secret",
    )
    assert d.partition_errors == {
        T0: E.OPERATION_NOT_ATTEMPTED,
        ("secret", 0): E.TOPIC_AUTHORIZATION_FAILED,
        ("t", 99): E.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert d.write is None and meta_of(coord).state == S.EMPTY


def test_add_offsets_adds_the_groups_offsets_partition(coord):
    put(coord, S.EMPTY)
    d = add_offsets(coord, AddOffsetsRequest(TX, 7, 5, "group-a"), 50)
    tp = ("__consumer_offsets", offsets_partition("group-a", 50))
    assert d.write.transit.partitions == {tp}
    assert add_offsets(coord, AddOffsetsRequest(TX, 7, 4, "g"), 50).error == E.PRODUCER_FENCED
    pending = add_offsets(coord, AddOffsetsRequest(TX, 7, 5, "g"), 50)
    assert pending.error == E.CONCURRENT_TRANSACTIONS


# -- EndTxn --------------------------------------------------------------------------------
END_CASES = [
    (S.EMPTY, True, E.INVALID_TXN_STATE),
    (S.EMPTY, False, E.INVALID_TXN_STATE),
    (S.PREPARE_COMMIT, True, E.CONCURRENT_TRANSACTIONS),
    (S.PREPARE_COMMIT, False, E.INVALID_TXN_STATE),
    (S.PREPARE_ABORT, False, E.CONCURRENT_TRANSACTIONS),
    (S.PREPARE_ABORT, True, E.INVALID_TXN_STATE),
    (S.COMPLETE_COMMIT, True, E.NONE),  # a retry of a completed commit
    (S.COMPLETE_COMMIT, False, E.INVALID_TXN_STATE),
    (S.COMPLETE_ABORT, False, E.NONE),
    (S.COMPLETE_ABORT, True, E.INVALID_TXN_STATE),
]


@pytest.mark.parametrize(("state", "commit", "error"), END_CASES)
def test_end_txn_without_an_open_transaction(coord, state, commit, error):
    m = put(coord, state)
    d = end_txn(coord, EndTxnRequest(TX, 7, 5, commit), 50)
    assert (d.error, d.write, m.state) == (error, None, state)


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_commit_and_abort(coord, commit):
    m = put(coord, S.ONGOING, partitions=frozenset({T0, ("t", 1), ("u", 0)}))
    d = end_txn(coord, EndTxnRequest(TX, 7, 5, commit), 50)
    assert d.write.transit.state == (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
    assert d.write.then_markers
    answer = replicate(coord, d, 60)
    assert answer.error == E.NONE and answer.markers.commit == commit
    assert m.pending == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    # a retry while the markers are out
    assert end_txn(coord, EndTxnRequest(TX, 7, 5, commit), 61).error == E.CONCURRENT_TRANSACTIONS
    send = answer.markers
    progress = markers_answered(coord, send, {T0: E.NONE, ("t", 1): E.NOT_LEADER_OR_FOLLOWER})
    assert progress.retry == {("t", 1)} and progress.write is None
    progress = markers_answered(coord, send, {("t", 1): E.NONE})
    assert progress.write is None  # ("u", 0) is still due
    progress = markers_answered(coord, send, {("u", 0): E.UNSUPPORTED_FOR_MESSAGE_FORMAT})
    done = replicate(coord, progress, 70)
    assert done.error == E.NONE
    assert (m.state, m.partitions, m.pending) == (
        S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT,
        set(),
        None,
    )
    # and a retry of the EndTxn now
    assert end_txn(coord, EndTxnRequest(TX, 7, 5, commit), 80).error == E.NONE


def test_end_txn_checks(coord):
    assert end_txn(coord, EndTxnRequest(TX, 7, 5, True), 0).error == E.INVALID_PRODUCER_ID_MAPPING
    assert end_txn(coord, EndTxnRequest("", 7, 5, True), 0).error == E.INVALID_REQUEST
    put(coord, S.ONGOING)
    assert end_txn(coord, EndTxnRequest(TX, 8, 5, True), 0).error == E.INVALID_PRODUCER_ID_MAPPING
    assert end_txn(coord, EndTxnRequest(TX, 7, 4, True), 0).error == E.PRODUCER_FENCED
    assert end_txn(coord, EndTxnRequest(TX, 7, 6, True), 0).error == E.PRODUCER_FENCED


# -- after writes ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("append_error", "answer"),
    [
        (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
        (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
        (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
        (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
    ],
)
def test_a_failed_write_answers_the_mapped_error_and_changes_nothing(coord, append_error, answer):
    m = put(coord, S.ONGOING)
    d = end_txn(coord, EndTxnRequest(TX, 7, 5, True), 50)
    assert replicate(coord, d, error=append_error).error == answer
    assert (m.state, m.pending) == (S.ONGOING, None)


def test_a_failed_completion_write_is_retried(coord):
    m = put(coord, S.ONGOING)
    markers = replicate(coord, end_txn(coord, EndTxnRequest(TX, 7, 5, True), 50)).markers
    progress = markers_answered(coord, markers, {T0: E.NONE})
    again = replicate(coord, progress, error=E.NOT_ENOUGH_REPLICAS)
    assert again.write == progress.write and m.pending == S.COMPLETE_COMMIT
    replicate(coord, again)
    assert m.state == S.COMPLETE_COMMIT


def test_a_write_after_the_partition_moved_is_not_applied(coord):
    put(coord, S.EMPTY)
    d = init(coord)
    begin_loading(coord, P)
    load_partition(coord, P, 4, [], 0)
    assert replicate(coord, d).error == E.NOT_COORDINATOR
    assert TX not in coord.partitions[P].transactions


def test_markers_cancelled_by_a_newer_epoch(coord):
    put(coord, S.ONGOING)
    markers = replicate(coord, end_txn(coord, EndTxnRequest(TX, 7, 5, False), 50)).markers
    assert markers_answered(coord, markers, {T0: E.INVALID_PRODUCER_EPOCH}).cancelled


def test_marker_requests_are_batched_per_leader():
    done = TxnTransit(7, 7, 5, -1, 1, S.COMPLETE_COMMIT, frozenset(), 1, 2)
    a = SendMarkers("a", 7, 5, True, 3, frozenset({("t", 0), ("t", 1), ("u", 0)}), done)
    b = SendMarkers("b", 8, 2, False, 3, frozenset({("t", 0), ("v", 0)}), done)
    leaders = {("t", 0): 1, ("t", 1): 2, ("u", 0): 1, ("v", 0): None}
    requests, no_leader = marker_requests([a, b], leaders.get)
    assert requests == {
        1: {
            "markers": [
                {
                    "producer_id": 7,
                    "producer_epoch": 5,
                    "transaction_result": True,
                    "topics": [
                        {"name": "t", "partition_indexes": [0]},
                        {"name": "u", "partition_indexes": [0]},
                    ],
                    "coordinator_epoch": 3,
                },
                {
                    "producer_id": 8,
                    "producer_epoch": 2,
                    "transaction_result": False,
                    "topics": [{"name": "t", "partition_indexes": [0]}],
                    "coordinator_epoch": 3,
                },
            ]
        },
        2: {
            "markers": [
                {
                    "producer_id": 7,
                    "producer_epoch": 5,
                    "transaction_result": True,
                    "topics": [{"name": "t", "partition_indexes": [1]}],
                    "coordinator_epoch": 3,
                }
            ]
        },
    }
    assert no_leader == [(b, frozenset({("v", 0)}))]


# -- timeouts and expiry ----------------------------------------------------------------------
def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced(coord):
    m = put(coord, S.ONGOING, start=10)  # timeout 60000
    assert timed_out(coord, 60010) == []
    assert timed_out(coord, 60011) == [(TX, 7)]
    d = abort_timed_out(coord, TX, 7, 60011)
    assert (d.write.transit.state, d.write.transit.producer_epoch) == (S.PREPARE_ABORT, 6)
    assert timed_out(coord, 70000) == []  # pending
    markers = replicate(coord, d, 60012).markers
    assert not markers.commit
    replicate(coord, markers_answered(coord, markers, {T0: E.NONE}))
    assert (m.state, m.producer_epoch) == (S.COMPLETE_ABORT, 6)
    assert add(coord, epoch=5).error == E.PRODUCER_FENCED
    assert end_txn(coord, EndTxnRequest(TX, 7, 5, True), 0).error == E.PRODUCER_FENCED


def test_abort_timed_out_skips_what_changed(coord):
    put(coord, S.COMPLETE_COMMIT)
    assert abort_timed_out(coord, TX, 7, 0).error == E.INVALID_TXN_STATE
    assert abort_timed_out(coord, TX, 8, 0).error == E.INVALID_PRODUCER_ID_MAPPING


@pytest.mark.parametrize("state", list(TxnState)[:6])
def test_expiry_of_idle_ids(coord, state):
    m = put(coord, state, start=10)
    assert expire_transactional_ids(coord, 1009) == []
    writes = expire_transactional_ids(coord, 1010)
    if state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        assert writes == []
        return
    (w,) = writes
    key, value = w.encode()
    assert value is None and decode_record(key, value).transactional_id == TX
    assert m.pending == S.DEAD
    replicate(coord, w)
    assert TX not in coord.partitions[P].transactions


def test_a_failed_tombstone_keeps_the_id(coord):
    m = put(coord, S.EMPTY, start=10)
    (w,) = expire_transactional_ids(coord, 5000)
    replicate(coord, w, error=E.NOT_ENOUGH_REPLICAS)
    assert coord.partitions[P].transactions[TX] is m and m.pending is None


# -- loading ---------------------------------------------------------------------------------
def record(txn_id, state, epoch=5, partitions=frozenset()):
    value = TxnTransit(7, 7, epoch, -1, 60000, state, partitions, 10, 20)
    return encode_record(TxnRecord(txn_id, value))


def test_loading_rebuilds_and_resends_prepared_markers():
    state = TxnCoordinatorState(TxnConfig(state_partitions=1))
    begin_loading(state, 0)
    assert init_producer_id(state, InitProducerIdRequest("a", 1000), 0, Ids()).error == (
        E.COORDINATOR_LOAD_IN_PROGRESS
    )
    gone = encode_record(
        __import__("broker.transactions.state_topic").transactions.state_topic.tombstone("gone")
    )
    records = [
        record("a", S.ONGOING, partitions=frozenset({T0})),
        record("a", S.PREPARE_COMMIT, partitions=frozenset({T0, ("t", 1)})),
        record("b", S.PREPARE_ABORT, epoch=9, partitions=frozenset({("u", 0)})),
        record("c", S.COMPLETE_COMMIT),
        record("gone", S.EMPTY),
        gone,
        (b"\x00\x07junk", None),  # a key version we do not know: skipped
    ]
    sends = load_partition(state, 0, coordinator_epoch=12, records=records, now_ms=100)
    txns = state.partitions[0].transactions
    assert sorted(txns) == ["a", "b", "c"]
    assert {
        (s.transactional_id, s.commit, s.producer_epoch, s.coordinator_epoch) for s in sends
    } == {
        ("a", True, 5, 12),
        ("b", False, 9, 12),
    }
    a = next(s for s in sends if s.transactional_id == "a")
    assert a.partitions == {T0, ("t", 1)}
    assert txns["a"].pending == S.COMPLETE_COMMIT
    # the client's retried EndTxn waits for them
    assert end_txn(state, EndTxnRequest("a", 7, 5, True), 101).error == E.CONCURRENT_TRANSACTIONS
    replicate(state, markers_answered(state, a, {T0: E.NONE, ("t", 1): E.NONE}), 102)
    assert txns["a"].state == S.COMPLETE_COMMIT
    assert end_txn(state, EndTxnRequest("a", 7, 5, True), 103).error == E.NONE
