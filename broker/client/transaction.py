"""The transactional producer's state and decisions, without sockets (Kafka's client-side
TransactionManager; the broker's side: docs/contracts/transactions.md).

`TransactionManager` holds a transactional producer's standing: its state (the table
`TRANSITIONS`, Kafka's client states), producer id and epoch, the partitions of the open
transaction and the error that made it abortable or fatal. `action_for` classifies an
answer's error code per request as Kafka's client does: done, retry at the same
coordinator, find the coordinator again and retry, abortable (the application must call
abort_transaction and may go on) or fatal (the producer is unusable; PRODUCER_FENCED is
the common one: a newer producer took the transactional id). The producer
(broker/client/producer.py) sends the requests and feeds the answers back here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from enum import Enum
from typing import NamedTuple

from broker.protocol.errors import ErrorCode, KafkaError

E = ErrorCode


class TxnState(Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING = "COMMITTING_TRANSACTION"
    ABORTING = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TxnState

# to -> the states it may be entered from (Kafka's TransactionManager.State).
TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset({S.UNINITIALIZED}),
    # From ABORTING: the epoch bump after an abort whose producer id the broker lost.
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING, S.ABORTING}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING: frozenset({S.IN_TRANSACTION}),
    S.ABORTING: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset(
        {S.IN_TRANSACTION, S.COMMITTING, S.ABORTABLE_ERROR, S.INITIALIZING}
    ),
    S.FATAL_ERROR: frozenset(TxnState),
}


class Action(Enum):
    DONE = "done"
    RETRY = "retry"  # same coordinator, after a backoff
    FIND_COORDINATOR = "find coordinator"  # it moved: look it up again, then retry
    ABORTABLE = "abortable"
    FATAL = "fatal"


# The requests a transactional producer sends, as keys of ERROR_ACTIONS.
INIT = "InitProducerId"
ADD_PARTITIONS = "AddPartitionsToTxn"
ADD_OFFSETS = "AddOffsetsToTxn"
TXN_OFFSET_COMMIT = "TxnOffsetCommit"
END = "EndTxn"
PRODUCE = "Produce"

_COORDINATOR = {
    E.NONE: Action.DONE,
    E.NOT_COORDINATOR: Action.FIND_COORDINATOR,
    E.COORDINATOR_NOT_AVAILABLE: Action.FIND_COORDINATOR,
    E.COORDINATOR_LOAD_IN_PROGRESS: Action.RETRY,
    E.CONCURRENT_TRANSACTIONS: Action.RETRY,
}
# The broker lost or never had the producer id: abort, then a new epoch (KIP-360).
_LOST_PRODUCER = {
    E.UNKNOWN_PRODUCER_ID: Action.ABORTABLE,
    E.INVALID_PRODUCER_ID_MAPPING: Action.ABORTABLE,
}

# request -> error code -> action; a code a request does not list is FATAL (as Kafka's
# handlers: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
# INVALID_TXN_STATE and whatever else is unexpected).
ERROR_ACTIONS: dict[str, dict[ErrorCode, Action]] = {
    INIT: dict(_COORDINATOR),
    ADD_PARTITIONS: {
        **_COORDINATOR,
        **_LOST_PRODUCER,
        E.UNKNOWN_TOPIC_OR_PARTITION: Action.RETRY,
        E.TOPIC_AUTHORIZATION_FAILED: Action.ABORTABLE,
        # Set on the other partitions when one failed: that one's code decides.
        E.OPERATION_NOT_ATTEMPTED: Action.ABORTABLE,
    },
    ADD_OFFSETS: {**_COORDINATOR, **_LOST_PRODUCER, E.GROUP_AUTHORIZATION_FAILED: Action.ABORTABLE},
    TXN_OFFSET_COMMIT: {
        E.NONE: Action.DONE,
        E.NOT_COORDINATOR: Action.FIND_COORDINATOR,
        E.COORDINATOR_NOT_AVAILABLE: Action.FIND_COORDINATOR,
        E.REQUEST_TIMED_OUT: Action.FIND_COORDINATOR,
        E.COORDINATOR_LOAD_IN_PROGRESS: Action.RETRY,
        E.UNKNOWN_TOPIC_OR_PARTITION: Action.RETRY,
        E.CONCURRENT_TRANSACTIONS: Action.RETRY,
        E.GROUP_AUTHORIZATION_FAILED: Action.ABORTABLE,
        # The consumer's generation is gone (a rebalance): its offsets must not count.
        E.UNKNOWN_MEMBER_ID: Action.ABORTABLE,
        E.ILLEGAL_GENERATION: Action.ABORTABLE,
        E.FENCED_INSTANCE_ID: Action.ABORTABLE,
    },
    END: {**_COORDINATOR, **_LOST_PRODUCER},
}

# A batch that failed inside a transaction makes it abortable, except for these: the
# producer itself is no longer allowed to write.
_FATAL_FOR_PRODUCE = frozenset(
    {
        E.PRODUCER_FENCED,
        E.INVALID_PRODUCER_EPOCH,
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        E.CLUSTER_AUTHORIZATION_FAILED,
    }
)
# Abortable errors after which the same epoch cannot go on: the abort is followed by
# InitProducerId with the current producer id and epoch (KIP-360), restarting sequences.
_BUMP_AFTER = frozenset(
    {E.UNKNOWN_PRODUCER_ID, E.INVALID_PRODUCER_ID_MAPPING, E.OUT_OF_ORDER_SEQUENCE_NUMBER}
)


def action_for(request: str, code: int) -> Action:
    """What a transactional producer does with `code` in an answer to `request`."""
    if request == PRODUCE:
        if code == E.NONE:
            return Action.DONE
        return Action.FATAL if code in _FATAL_FOR_PRODUCE else Action.ABORTABLE
    return ERROR_ACTIONS[request].get(code, Action.FATAL)


_RANK = {
    Action.DONE: 0,
    Action.RETRY: 1,
    Action.FIND_COORDINATOR: 2,
    Action.ABORTABLE: 3,
    Action.FATAL: 4,
}


def worst(request: str, codes: Iterable[int]) -> tuple[Action, int]:
    """The action and code that decide an answer with one code per partition: fatal over
    abortable over finding the coordinator over a retry over done; OPERATION_NOT_ATTEMPTED
    never hides the code of the partition that failed."""
    best_action, best_code = Action.DONE, int(E.NONE)
    for code in codes:
        action = action_for(request, code)
        rank, best_rank = _RANK[action], _RANK[best_action]
        if rank > best_rank or (rank == best_rank and best_code == E.OPERATION_NOT_ATTEMPTED):
            best_action, best_code = action, code
    return best_action, best_code


class TransactionStateError(RuntimeError):
    """A call that the transaction's state does not allow (Java's IllegalStateException),
    e.g. send() before begin_transaction() or commit_transaction() twice."""


class TransactionAbortableError(KafkaError):
    """The open transaction cannot commit; abort_transaction() and the producer goes on.
    `.code` is the error that caused it."""


class TransactionFatalError(KafkaError):
    """The producer cannot be used any more (close it); `.code` is the cause, e.g.
    PRODUCER_FENCED when a newer producer took the transactional id."""


class ConsumerGroupMetadata(NamedTuple):
    """What TxnOffsetCommit says of the consumer whose offsets it commits (Java's
    ConsumerGroupMetadata; GroupConsumer.group_metadata() gives one)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class TransactionManager:
    """A transactional producer's state (see the module docstring); thread-safe, since the
    caller's thread (begin, commit, abort) and the sender thread (partitions added,
    batches failed) both move it."""

    def __init__(self, transactional_id: str, timeout_ms: int):
        if not transactional_id:
            raise ValueError("transactional.id must not be empty")
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.state = S.UNINITIALIZED
        self.producer_id = -1
        self.epoch = -1
        self.partitions: set[tuple[str, int]] = set()  # added to the open transaction
        self.error: KafkaError | None = None  # why ABORTABLE_ERROR or FATAL_ERROR
        self.bump_epoch = False  # InitProducerId after the abort (KIP-360)
        self.offsets_added = False  # this transaction has sent offsets
        self._lock = threading.Lock()

    def _move(self, to: TxnState) -> None:
        if self.state not in TRANSITIONS[to]:
            if self.state in (S.ABORTABLE_ERROR, S.FATAL_ERROR) and self.error is not None:
                raise self._raised()
            raise TransactionStateError(
                f"transactional id {self.transactional_id!r}: cannot go from "
                f"{self.state.value} to {to.value}"
            )
        self.state = to

    def _raised(self) -> KafkaError:
        cls = TransactionFatalError if self.state == S.FATAL_ERROR else TransactionAbortableError
        error = cls(str(self.error), self.error.code)
        error.__cause__ = self.error
        return error

    # --- the caller's steps --------------------------------------------------------

    def start_init(self) -> None:
        with self._lock:
            self._move(S.INITIALIZING)

    def initialized(self, producer_id: int, epoch: int) -> None:
        with self._lock:
            self.producer_id, self.epoch = producer_id, epoch
            self.partitions.clear()
            self.bump_epoch = False
            self._move(S.READY)

    def begin(self) -> None:
        with self._lock:
            self._move(S.IN_TRANSACTION)
            self.offsets_added = False

    def check_send(self) -> None:
        """send() is allowed only inside a transaction that can still commit."""
        with self._lock:
            if self.state == S.IN_TRANSACTION:
                return
            if self.state in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
                raise self._raised()
            raise TransactionStateError(
                f"cannot send in state {self.state.value}: call begin_transaction() first"
            )

    def check_in_transaction(self) -> None:
        """As check_send, for send_offsets_to_transaction."""
        self.check_send()

    def start_commit(self) -> None:
        with self._lock:
            if self.state in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
                raise self._raised()
            self._move(S.COMMITTING)

    def start_abort(self) -> None:
        with self._lock:
            if self.state == S.FATAL_ERROR:
                raise self._raised()
            self._move(S.ABORTING)

    def completed(self) -> None:
        """EndTxn answered NONE: the transaction is over."""
        with self._lock:
            self.partitions.clear()
            self.error = None
            if self.state == S.ABORTING and self.bump_epoch:
                self._move(S.INITIALIZING)  # the caller bumps the epoch next
            else:
                self._move(S.READY)

    # --- the sender's side ---------------------------------------------------------

    def partitions_to_add(self, tps: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        with self._lock:
            return sorted(set(tps) - self.partitions)

    def added(self, tps: Iterable[tuple[str, int]]) -> None:
        with self._lock:
            self.partitions.update(tps)

    def may_send(self) -> KafkaError | None:
        """None while batches may go out; else the error to fail them with (the
        transaction already failed: nothing more of it is sent)."""
        with self._lock:
            if self.state in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
                return self._raised()
            return None

    # --- errors --------------------------------------------------------------------

    def fail(self, action: Action, error: KafkaError) -> KafkaError:
        """Record an ABORTABLE or FATAL outcome; returns the exception to raise."""
        with self._lock:
            if action == Action.FATAL:
                self.error = error
                self.state = S.FATAL_ERROR
            elif self.state != S.FATAL_ERROR:
                if self.state in TRANSITIONS[S.ABORTABLE_ERROR]:
                    if self.error is None or self.state != S.ABORTABLE_ERROR:
                        self.error = error
                    self.state = S.ABORTABLE_ERROR
                elif self.state == S.ABORTING:
                    # An abort going wrong stays an abort; a lost producer id is fixed by
                    # the epoch bump that follows it.
                    self.error = error
                if error.code in _BUMP_AFTER:
                    self.bump_epoch = True
            return self._raised() if self.error is not None else error

    def batch_failed(self, error: KafkaError) -> None:
        """A batch of the open transaction failed for good: it cannot commit."""
        self.fail(action_for(PRODUCE, error.code), error)
