"""The transactional producer's state machine and error classification
(broker/client/transaction.py), without sockets."""

from __future__ import annotations

import pytest

from broker.client import transaction as t
from broker.client.transaction import (
    TRANSITIONS,
    Action,
    TransactionAbortableError,
    TransactionFatalError,
    TransactionManager,
    TransactionStateError,
    TxnState,
    action_for,
    worst,
)
from broker.protocol.errors import ErrorCode as E
from broker.protocol.errors import KafkaError

S = TxnState


def _manager(state: TxnState = S.READY) -> TransactionManager:
    m = TransactionManager("app-1", 60000)
    m.start_init()
    m.initialized(7, 0)
    if state == S.IN_TRANSACTION:
        m.begin()
    return m


def test_the_table_is_kafkas():
    # Every state is reachable only from the states Kafka's client allows.
    assert TRANSITIONS[S.IN_TRANSACTION] == {S.READY}
    assert TRANSITIONS[S.COMMITTING] == {S.IN_TRANSACTION}
    assert TRANSITIONS[S.ABORTING] == {S.IN_TRANSACTION, S.ABORTABLE_ERROR}
    assert TRANSITIONS[S.READY] == {S.INITIALIZING, S.COMMITTING, S.ABORTING}
    assert TRANSITIONS[S.FATAL_ERROR] == set(TxnState)
    assert S.READY not in TRANSITIONS[S.ABORTABLE_ERROR]


def test_a_transaction_commits_and_the_next_one_begins():
    m = TransactionManager("app-1", 60000)
    with pytest.raises(TransactionStateError, match="begin_transaction"):
        m.check_send()
    with pytest.raises(TransactionStateError, match="UNINITIALIZED to IN_TRANSACTION"):
        m.begin()
    m.start_init()
    m.initialized(7, 3)
    assert (m.state, m.producer_id, m.epoch) == (S.READY, 7, 3)
    m.begin()
    m.check_send()
    assert m.partitions_to_add([("a", 0), ("a", 1), ("a", 0)]) == [("a", 0), ("a", 1)]
    m.added([("a", 0)])
    assert m.partitions_to_add([("a", 0), ("a", 1)]) == [("a", 1)]
    m.start_commit()
    with pytest.raises(TransactionStateError, match="COMMITTING_TRANSACTION"):
        m.check_send()
    m.completed()
    assert (m.state, m.partitions) == (S.READY, set())
    with pytest.raises(TransactionStateError):
        m.start_commit()  # no transaction open
    m.begin()
    m.start_abort()
    m.completed()
    assert m.state == S.READY


def test_an_abortable_error_refuses_commit_and_sends_until_aborted():
    m = _manager(S.IN_TRANSACTION)
    m.batch_failed(KafkaError("leader gone too long", E.REQUEST_TIMED_OUT))
    assert m.state == S.ABORTABLE_ERROR
    with pytest.raises(TransactionAbortableError) as raised:
        m.check_send()
    assert raised.value.code == E.REQUEST_TIMED_OUT
    with pytest.raises(TransactionAbortableError):
        m.start_commit()
    assert isinstance(m.may_send(), TransactionAbortableError)
    # A second failure keeps the first cause.
    m.batch_failed(KafkaError(None, E.NOT_ENOUGH_REPLICAS))
    assert m.error.code == E.REQUEST_TIMED_OUT
    m.start_abort()
    m.completed()
    assert (m.state, m.error, m.may_send()) == (S.READY, None, None)


def test_fencing_is_fatal_for_good():
    m = _manager(S.IN_TRANSACTION)
    m.batch_failed(KafkaError(None, E.PRODUCER_FENCED))
    assert m.state == S.FATAL_ERROR
    for step in (m.check_send, m.start_commit, m.start_abort, m.begin):
        with pytest.raises(TransactionFatalError) as raised:
            step()
        assert raised.value.code == E.PRODUCER_FENCED


def test_a_lost_producer_id_aborts_then_bumps_the_epoch():
    m = _manager(S.IN_TRANSACTION)
    raised = m.fail(Action.ABORTABLE, KafkaError(None, E.UNKNOWN_PRODUCER_ID))
    assert isinstance(raised, TransactionAbortableError)
    assert m.bump_epoch
    m.start_abort()
    m.completed()
    assert m.state == S.INITIALIZING  # InitProducerId with the current id and epoch next
    m.initialized(7, 1)
    assert (m.state, m.epoch, m.bump_epoch) == (S.READY, 1, False)


def test_an_abortable_error_while_committing():
    m = _manager(S.IN_TRANSACTION)
    m.start_commit()
    m.fail(Action.ABORTABLE, KafkaError(None, E.TOPIC_AUTHORIZATION_FAILED))
    assert m.state == S.ABORTABLE_ERROR
    m.start_abort()
    m.completed()
    assert m.state == S.READY


@pytest.mark.parametrize(
    "request_, code, action",
    [
        (t.INIT, E.NONE, Action.DONE),
        (t.INIT, E.CONCURRENT_TRANSACTIONS, Action.RETRY),  # an old transaction is aborting
        (t.INIT, E.COORDINATOR_LOAD_IN_PROGRESS, Action.RETRY),
        (t.INIT, E.NOT_COORDINATOR, Action.FIND_COORDINATOR),
        (t.INIT, E.COORDINATOR_NOT_AVAILABLE, Action.FIND_COORDINATOR),
        (t.INIT, E.PRODUCER_FENCED, Action.FATAL),
        (t.INIT, E.INVALID_TRANSACTION_TIMEOUT, Action.FATAL),
        (t.INIT, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Action.FATAL),
        (t.ADD_PARTITIONS, E.UNKNOWN_TOPIC_OR_PARTITION, Action.RETRY),
        (t.ADD_PARTITIONS, E.TOPIC_AUTHORIZATION_FAILED, Action.ABORTABLE),
        (t.ADD_PARTITIONS, E.INVALID_PRODUCER_ID_MAPPING, Action.ABORTABLE),
        (t.ADD_PARTITIONS, E.INVALID_TXN_STATE, Action.FATAL),
        (t.ADD_PARTITIONS, E.INVALID_PRODUCER_EPOCH, Action.FATAL),
        (t.ADD_OFFSETS, E.GROUP_AUTHORIZATION_FAILED, Action.ABORTABLE),
        (t.ADD_OFFSETS, E.CONCURRENT_TRANSACTIONS, Action.RETRY),
        (t.TXN_OFFSET_COMMIT, E.ILLEGAL_GENERATION, Action.ABORTABLE),
        (t.TXN_OFFSET_COMMIT, E.UNKNOWN_MEMBER_ID, Action.ABORTABLE),
        (t.TXN_OFFSET_COMMIT, E.FENCED_INSTANCE_ID, Action.ABORTABLE),
        (t.TXN_OFFSET_COMMIT, E.REQUEST_TIMED_OUT, Action.FIND_COORDINATOR),
        (t.TXN_OFFSET_COMMIT, E.PRODUCER_FENCED, Action.FATAL),
        (t.END, E.CONCURRENT_TRANSACTIONS, Action.RETRY),
        (t.END, E.NOT_COORDINATOR, Action.FIND_COORDINATOR),
        (t.END, E.INVALID_TXN_STATE, Action.FATAL),
        (t.END, E.PRODUCER_FENCED, Action.FATAL),
        (t.END, E.UNKNOWN_PRODUCER_ID, Action.ABORTABLE),
        (t.PRODUCE, E.NOT_ENOUGH_REPLICAS, Action.ABORTABLE),
        (t.PRODUCE, E.TRANSACTION_ABORTABLE, Action.ABORTABLE),
        (t.PRODUCE, E.INVALID_PRODUCER_EPOCH, Action.FATAL),
        (t.PRODUCE, E.PRODUCER_FENCED, Action.FATAL),
    ],
)
def test_errors_are_classified_as_kafkas_client_does(request_, code, action):
    assert action_for(request_, code) == action


def test_the_worst_code_of_an_answer_decides():
    # The partition that failed decides, not the others' OPERATION_NOT_ATTEMPTED.
    codes = [E.OPERATION_NOT_ATTEMPTED, E.TOPIC_AUTHORIZATION_FAILED, E.OPERATION_NOT_ATTEMPTED]
    assert worst(t.ADD_PARTITIONS, codes) == (Action.ABORTABLE, E.TOPIC_AUTHORIZATION_FAILED)
    assert worst(t.ADD_PARTITIONS, [E.NONE, E.CONCURRENT_TRANSACTIONS]) == (
        Action.RETRY,
        E.CONCURRENT_TRANSACTIONS,
    )
    assert worst(t.ADD_PARTITIONS, [E.UNKNOWN_TOPIC_OR_PARTITION, E.PRODUCER_FENCED])[0] == (
        Action.FATAL
    )
    assert worst(t.TXN_OFFSET_COMMIT, []) == (Action.DONE, E.NONE)


def test_an_empty_transactional_id_is_refused():
    with pytest.raises(ValueError, match="transactional.id"):
        TransactionManager("", 60000)
