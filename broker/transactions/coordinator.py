"""The transaction coordinator's decisions, as functions of request, metadata, clock and config.

Nothing here does I/O: every function returns a `Decision` (the answer, and the effects
the caller carries out: a record to write to `__transaction_state`, markers to send), and
the caller reports back (`record_written`, `markers_answered`). The broker wiring, the
purgatories and the inter-broker sends are later steps (docs/contracts/transactions.md).

The order of checks and the error of each case are Kafka's (ZooKeeper-era
TransactionCoordinator; with a client of transaction version 2, KIP-890 part 2's epoch
bump at every EndTxn), so clients see the codes their retry logic expects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from broker.coordinator.offsets_topic import OFFSETS_TOPIC
from broker.coordinator.offsets_topic import partition_for as offsets_partition_for
from broker.protocol.errors import ErrorCode
from broker.protocol.types import DecodeError
from broker.transactions.state import (
    INT16_MAX,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_EPOCH_BUMP,
    IllegalStateTransition,
    TopicPartition,
    TxnMetadata,
    TxnState,
    TxnTransit,
    is_epoch_exhausted,
)
from broker.transactions.state_topic import (
    TxnRecord,
    decode_key,
    decode_value,
    encode_record,
    partition_for,
)

E = ErrorCode
S = TxnState


@dataclass(frozen=True)
class TxnConfig:
    max_timeout_ms: int = 900000
    id_expiration_ms: int = 604800000
    state_partitions: int = 50
    offsets_partitions: int = 50

    @classmethod
    def from_broker_config(cls, cfg) -> TxnConfig:
        return cls(
            cfg["transaction.max.timeout.ms"],
            cfg["transactional.id.expiration.ms"],
            cfg["transaction.state.log.num.partitions"],
            cfg["offsets.topic.num.partitions"],
        )


@dataclass
class TxnPartition:
    """One `__transaction_state` partition this broker leads, at its leader epoch (the
    coordinator epoch the markers carry)."""

    index: int
    coordinator_epoch: int
    transactions: dict[str, TxnMetadata] = field(default_factory=dict)


@dataclass
class TxnCoordinatorState:
    config: TxnConfig
    partitions: dict[int, TxnPartition] = field(default_factory=dict)
    loading: set[int] = field(default_factory=set)

    def lookup(self, transactional_id: str) -> ErrorCode | tuple[TxnPartition, TxnMetadata | None]:
        index = partition_for(transactional_id, self.config.state_partitions)
        if index in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        owned = self.partitions.get(index)
        if owned is None:
            return E.NOT_COORDINATOR
        return owned, owned.transactions.get(transactional_id)


# -- effects ------------------------------------------------------------------------------
@dataclass(frozen=True)
class WriteState:
    """Append this record to `__transaction_state` (acks=all), then call `record_written`.
    `answer` is the answer once it is replicated; `then_markers`: the markers follow."""

    transactional_id: str
    partition: int
    coordinator_epoch: int
    transit: TxnTransit
    answer: ErrorCode = E.NONE
    then_markers: bool = False

    @property
    def record(self) -> TxnRecord:
        value = None if self.transit.state == S.DEAD else self.transit
        return TxnRecord(self.transactional_id, value)

    def encode(self) -> tuple[bytes, bytes | None]:
        return encode_record(self.record)


@dataclass(frozen=True)
class SendMarkers:
    """Write a COMMIT or ABORT marker to each partition (through its leader), then write
    `completion` (Complete*) once none is left."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]
    completion: TxnTransit


@dataclass(frozen=True)
class Decision:
    error: ErrorCode = E.NONE  # the answer now, or (with `write`) if the write succeeds
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    write: WriteState | None = None
    markers: SendMarkers | None = None
    # AddPartitionsToTxn: one code per partition (the whole answer, or refusals found
    # before the coordinator was asked)
    partition_errors: dict[TopicPartition, ErrorCode] | None = None


# PRODUCER_FENCED (KIP-588) goes to clients that know it; older request versions get
# INVALID_PRODUCER_EPOCH, which they handle the same way. API key -> first version.
PRODUCER_FENCED_SINCE = {
    22: 4,  # InitProducerId
    24: 2,  # AddPartitionsToTxn
    25: 2,  # AddOffsetsToTxn
    26: 2,  # EndTxn
}


def for_version(api_key: int, version: int, error: ErrorCode) -> ErrorCode:
    if error == E.PRODUCER_FENCED and version < PRODUCER_FENCED_SINCE.get(api_key, 0):
        return E.INVALID_PRODUCER_EPOCH
    return error


def _write(owner: TxnPartition, meta: TxnMetadata, transit: TxnTransit, **kw) -> WriteState:
    return WriteState(meta.transactional_id, owner.index, owner.coordinator_epoch, transit, **kw)


def _never(meta: TxnMetadata) -> IllegalStateTransition:
    return IllegalStateTransition(
        f"transactional id {meta.transactional_id} found in {meta.state.kafka_name}, "
        "a state no request may see"
    )


# -- InitProducerId -----------------------------------------------------------------------
@dataclass(frozen=True)
class InitProducerIdRequest:
    transactional_id: str
    transaction_timeout_ms: int
    producer_id: int = NO_PRODUCER_ID  # v3+ (KIP-360): the id and epoch the producer had
    producer_epoch: int = NO_PRODUCER_EPOCH


def init_producer_id(
    state: TxnCoordinatorState,
    req: InitProducerIdRequest,
    now_ms: int,
    new_producer_id: Callable[[], int],
) -> Decision:
    """InitProducerId with a transactional id (without one the producer is only
    idempotent: broker/server/handlers/init_producer_id.py). `new_producer_id` hands out
    a fresh id; it is called only when one is needed."""
    if not req.transactional_id:
        return Decision(E.INVALID_REQUEST)
    if (req.producer_id == NO_PRODUCER_ID) != (req.producer_epoch == NO_PRODUCER_EPOCH):
        return Decision(E.INVALID_REQUEST)
    if not 0 < req.transaction_timeout_ms <= state.config.max_timeout_ms:
        return Decision(E.INVALID_TRANSACTION_TIMEOUT)
    found = state.lookup(req.transactional_id)
    if isinstance(found, ErrorCode):
        return Decision(found)
    owner, meta = found
    if meta is None:
        meta = TxnMetadata(
            req.transactional_id,
            new_producer_id(),
            timeout_ms=req.transaction_timeout_ms,
            update_ms=now_ms,
        )
        owner.transactions[meta.transactional_id] = meta
    expected = req.producer_id != NO_PRODUCER_ID
    if meta.pending is not None:
        return Decision(E.CONCURRENT_TRANSACTIONS)
    if expected and not (
        # a new id (after UNKNOWN_PRODUCER_ID), the current id, or a retry of a rotation
        meta.producer_epoch == NO_PRODUCER_EPOCH
        or req.producer_id == meta.producer_id
        or (req.producer_id == meta.last_producer_id and is_epoch_exhausted(req.producer_epoch))
    ):
        return Decision(E.PRODUCER_FENCED)
    if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return Decision(E.CONCURRENT_TRANSACTIONS)
    if meta.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        if is_epoch_exhausted(meta.producer_epoch) and (
            not expected or req.producer_epoch == meta.producer_epoch
        ):
            transit = meta.prepare_producer_id_rotation(
                new_producer_id(), req.transaction_timeout_ms, now_ms, expected
            )
        else:
            transit = meta.prepare_epoch_bump(
                req.transaction_timeout_ms, req.producer_epoch if expected else None, now_ms
            )
            if transit is None:
                return Decision(E.PRODUCER_FENCED)
        return Decision(
            producer_id=transit.producer_id,
            producer_epoch=transit.producer_epoch,
            write=_write(owner, meta, transit),
        )
    if meta.state == S.ONGOING:
        # Abort the open transaction under a bumped epoch (fencing its producer), answer
        # CONCURRENT_TRANSACTIONS; the client's retry then bumps the epoch again (or
        # rotates the producer id if this fence used the last epoch).
        transit = meta.prepare_epoch_fence(now_ms)
        return Decision(
            E.CONCURRENT_TRANSACTIONS,
            write=_write(owner, meta, transit, answer=E.CONCURRENT_TRANSACTIONS, then_markers=True),
        )
    raise _never(meta)


# -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------
@dataclass(frozen=True)
class AddPartitionsRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: frozenset[TopicPartition]
    # 2: a transaction version 2 Produce adding its partition (AddPartitionsToTxn v5
    # from its leader, not verify_only); the transaction's end will bump the epoch.
    client_tv: int = 0


def add_partitions(
    state: TxnCoordinatorState,
    req: AddPartitionsRequest,
    now_ms: int,
    partition_exists: Callable[[TopicPartition], bool] = lambda tp: True,
    topic_authorized: Callable[[str], bool] = lambda topic: True,
) -> Decision:
    """AddPartitionsToTxn v0-v3 (the client's path). A partition of an unauthorized or
    unknown topic fails the whole request: those get their own code, the others
    OPERATION_NOT_ATTEMPTED, and nothing is added. Otherwise one code for all."""
    refused = {}
    for tp in req.partitions:
        if not topic_authorized(tp[0]):
            refused[tp] = E.TOPIC_AUTHORIZATION_FAILED
        elif not partition_exists(tp):
            refused[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
    if refused:
        errors = {tp: refused.get(tp, E.OPERATION_NOT_ATTEMPTED) for tp in req.partitions}
        return Decision(E.NONE, partition_errors=errors)
    decision = _add(state, req, now_ms)
    return Decision(
        decision.error,
        write=decision.write,
        partition_errors={tp: decision.error for tp in req.partitions},
    )


def verify_partitions(state: TxnCoordinatorState, req: AddPartitionsRequest) -> Decision:
    """AddPartitionsToTxn v4 with verify_only (KIP-890 part 1, a partition leader asking
    before a transactional produce): NONE for each partition in the open transaction,
    INVALID_TXN_STATE for the others; nothing is written."""
    found = _transaction_of(state, req)
    if isinstance(found, Decision):
        return Decision(found.error, partition_errors={tp: found.error for tp in req.partitions})
    _, meta = found
    ongoing = meta.state == S.ONGOING
    return Decision(
        partition_errors={
            tp: E.NONE if ongoing and tp in meta.partitions else E.INVALID_TXN_STATE
            for tp in req.partitions
        }
    )


def _transaction_of(state: TxnCoordinatorState, req) -> Decision | tuple:
    """(owner, metadata) of the transaction `req` (AddPartitionsToTxn or EndTxn) names,
    or the refusal Kafka answers first: no id, not here, another producer, an old epoch."""
    if not req.transactional_id:
        return Decision(E.INVALID_REQUEST)
    found = state.lookup(req.transactional_id)
    if isinstance(found, ErrorCode):
        return Decision(found)
    owner, meta = found
    if meta is None or meta.producer_id != req.producer_id:
        return Decision(E.INVALID_PRODUCER_ID_MAPPING)
    if meta.producer_epoch != req.producer_epoch:
        return Decision(E.PRODUCER_FENCED)
    return owner, meta


def _add(state: TxnCoordinatorState, req: AddPartitionsRequest, now_ms: int) -> Decision:
    found = _transaction_of(state, req)
    if isinstance(found, Decision):
        return found
    owner, meta = found
    if meta.pending is not None or meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return Decision(E.CONCURRENT_TRANSACTIONS)
    if meta.state == S.ONGOING and req.partitions <= meta.partitions:
        return Decision(E.NONE)  # already in the transaction: nothing to write
    transit = meta.prepare_add_partitions(req.partitions, now_ms, req.client_tv)
    return Decision(write=_write(owner, meta, transit))


@dataclass(frozen=True)
class AddOffsetsRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


def add_offsets(state: TxnCoordinatorState, req: AddOffsetsRequest, now_ms: int) -> Decision:
    """AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction,
    so the commit or abort marker reaches the offsets sent with TxnOffsetCommit."""
    tp = (OFFSETS_TOPIC, offsets_partition_for(req.group_id, state.config.offsets_partitions))
    add = AddPartitionsRequest(
        req.transactional_id, req.producer_id, req.producer_epoch, frozenset({tp})
    )
    return _add(state, add, now_ms)


# -- EndTxn -------------------------------------------------------------------------------
@dataclass(frozen=True)
class EndTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    client_tv: int = 0  # 2 from EndTxn v5 on (KIP-890 part 2): the end bumps the epoch


def end_txn(
    state: TxnCoordinatorState,
    req: EndTxnRequest,
    now_ms: int,
    new_producer_id: Callable[[], int] = lambda: NO_PRODUCER_ID,
) -> Decision:
    """`new_producer_id`: called only when a transaction version 2 end finds the epoch
    exhausted; the completion then moves the producer to that id at epoch 0."""
    if not req.transactional_id:
        return Decision(E.INVALID_REQUEST)
    found = state.lookup(req.transactional_id)
    if isinstance(found, ErrorCode):
        return Decision(found)
    owner, meta = found
    if meta is None:
        return Decision(E.INVALID_PRODUCER_ID_MAPPING)
    retry_on_overflow = (
        meta.bumps_at_end
        and req.producer_id == meta.last_producer_id
        and req.producer_epoch == INT16_MAX - 1
        and meta.producer_epoch == 0
    )
    if meta.producer_id != req.producer_id and not retry_on_overflow:
        return Decision(E.INVALID_PRODUCER_ID_MAPPING)
    if not _end_epoch_valid(meta, req, retry_on_overflow):
        return Decision(E.PRODUCER_FENCED)
    if meta.pending is not None:
        return Decision(E.CONCURRENT_TRANSACTIONS)
    done, preparing = (
        (S.COMPLETE_COMMIT, S.PREPARE_COMMIT) if req.commit else (S.COMPLETE_ABORT, S.PREPARE_ABORT)
    )
    if meta.state == S.ONGOING:
        next_producer_id = NO_PRODUCER_ID
        if req.client_tv >= TV_EPOCH_BUMP and is_epoch_exhausted(meta.producer_epoch):
            next_producer_id = new_producer_id()  # before any change: it may raise
        transit = meta.prepare_end(req.commit, now_ms, req.client_tv, next_producer_id)
        return Decision(write=_write(owner, meta, transit, then_markers=True))
    if meta.state == done:
        # A retry of an EndTxn that completed: the producer id and epoch to go on with.
        return Decision(E.NONE, meta.producer_id, meta.producer_epoch)
    if meta.state == preparing:
        return Decision(E.CONCURRENT_TRANSACTIONS)  # a retry while the markers go out
    if meta.state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
        raise _never(meta)
    return Decision(E.INVALID_TXN_STATE)


def _end_epoch_valid(meta: TxnMetadata, req: EndTxnRequest, retry_on_overflow: bool) -> bool:
    """Kafka's rule. Before transaction version 2 the epoch must be the current one. From
    2 on, the end bumped it: in Prepare*/Complete* only the epoch just before the bump
    (a retry of that EndTxn, answered as the first) or, after an overflow, the last
    epoch of the previous producer id is valid; the current epoch there would be the
    next transaction's end, which has nothing to end (fenced, as Kafka)."""
    if not meta.bumps_at_end:
        return req.producer_epoch == meta.producer_epoch
    retry_on_bump = meta.producer_epoch == req.producer_epoch + 1
    if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return retry_on_bump
    if meta.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        return retry_on_bump or retry_on_overflow
    return req.producer_epoch == meta.producer_epoch


# -- after a write ---------------------------------------------------------------------------
# Append errors as the client should see them (Kafka's mapping).
_APPEND_ERRORS = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
}


def record_written(
    state: TxnCoordinatorState, write: WriteState, append_error: ErrorCode, now_ms: int
) -> Decision:
    """The append of `write` finished (replicated, or failed with `append_error`)."""
    error = _APPEND_ERRORS.get(append_error, append_error)
    owner = state.partitions.get(write.partition)
    meta = owner.transactions.get(write.transactional_id) if owner else None
    if owner is None or meta is None or owner.coordinator_epoch != write.coordinator_epoch:
        # The partition moved (and maybe came back) meanwhile: its new loader decides.
        return Decision(E.NOT_COORDINATOR if error == E.NONE else error)
    if error != E.NONE:
        completing = write.transit.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        if completing and error == E.COORDINATOR_NOT_AVAILABLE:
            return Decision(error, write=write)  # the markers are out: retry the write
        if meta.pending == write.transit.state:
            meta.abandon_pending()
        return Decision(error)
    if write.transit.state == S.DEAD:
        if meta.pending == S.DEAD:
            del owner.transactions[write.transactional_id]
        return Decision()
    meta.complete(write.transit)
    producer_id, producer_epoch = write.transit.producer_id, write.transit.producer_epoch
    if write.transit.next_producer_id != NO_PRODUCER_ID:
        # The end used the last epoch: the producer goes on under the new id (what the
        # completion will hold), as a retry after it would be told too.
        producer_id, producer_epoch = write.transit.next_producer_id, 0
    if not write.then_markers:
        return Decision(write.answer, producer_id=producer_id, producer_epoch=producer_epoch)
    return Decision(
        write.answer,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        markers=_markers(owner, meta, now_ms),
    )


def _markers(owner: TxnPartition, meta: TxnMetadata, now_ms: int) -> SendMarkers:
    commit = meta.state == S.PREPARE_COMMIT
    completion = meta.prepare_complete(now_ms)
    return SendMarkers(
        meta.transactional_id,
        meta.producer_id,
        meta.producer_epoch,
        commit,
        owner.coordinator_epoch,
        frozenset(meta.partitions),
        completion,
    )


# -- markers ------------------------------------------------------------------------------
def marker_requests(
    sends: Iterable[SendMarkers], leader_of: Callable[[TopicPartition], int | None]
) -> tuple[dict[int, dict], list[tuple[SendMarkers, frozenset[TopicPartition]]]]:
    """WriteTxnMarkers request bodies, one per partition leader, each carrying every
    transaction's markers for that broker; and the partitions without a known leader
    (sent again once one is known)."""
    per_broker: dict[int, dict[SendMarkers, set[TopicPartition]]] = {}
    no_leader: dict[SendMarkers, set[TopicPartition]] = {}
    for send in sends:
        for tp in sorted(send.partitions):
            leader = leader_of(tp)
            target = no_leader if leader is None else per_broker.setdefault(leader, {})
            target.setdefault(send, set()).add(tp)
    requests = {
        broker: {"markers": [_marker(send, tps) for send, tps in by_send.items()]}
        for broker, by_send in per_broker.items()
    }
    return requests, [(send, frozenset(tps)) for send, tps in no_leader.items()]


def _marker(send: SendMarkers, partitions: set[TopicPartition]) -> dict:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return {
        "producer_id": send.producer_id,
        "producer_epoch": send.producer_epoch,
        "transaction_result": send.commit,
        "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
        "coordinator_epoch": send.coordinator_epoch,
    }


_MARKER_RETRY = frozenset(
    {
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.NOT_LEADER_OR_FOLLOWER,
        E.NOT_ENOUGH_REPLICAS,
        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        E.REQUEST_TIMED_OUT,
        E.KAFKA_STORAGE_ERROR,
    }
)
# The producer could never have written there: nothing to mark.
_MARKER_SKIP = frozenset({E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION})
# A newer producer epoch or coordinator took over: this completion is someone else's now.
_MARKER_CANCEL = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED})


@dataclass(frozen=True)
class MarkerProgress:
    retry: frozenset[TopicPartition] = frozenset()
    write: WriteState | None = None  # every marker is written: the completion record
    cancelled: bool = False


def markers_due(state: TxnCoordinatorState, send: SendMarkers) -> bool:
    """Whether `send`'s markers are still this coordinator's to send: its partition is
    still loaded at the same coordinator epoch and the transaction still prepared (a
    partition unloaded meanwhile is its next loader's business)."""
    owner = state.partitions.get(
        partition_for(send.transactional_id, state.config.state_partitions)
    )
    meta = owner.transactions.get(send.transactional_id) if owner else None
    return (
        meta is not None
        and owner.coordinator_epoch == send.coordinator_epoch
        and meta.producer_id == send.producer_id
        and meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
    )


def markers_answered(
    state: TxnCoordinatorState, send: SendMarkers, errors: dict[TopicPartition, ErrorCode]
) -> MarkerProgress:
    """A leader answered WriteTxnMarkers for some of `send`'s partitions (`errors`:
    partition -> code; an empty dict just checks whether any marker is still due)."""
    owner = state.partitions.get(
        partition_for(send.transactional_id, state.config.state_partitions)
    )
    meta = owner.transactions.get(send.transactional_id) if owner else None
    if owner is None or meta is None or owner.coordinator_epoch != send.coordinator_epoch:
        return MarkerProgress(cancelled=True)  # unloaded: the next loader sends them again
    retry = set()
    for tp, error in errors.items():
        if error == E.NONE or error in _MARKER_SKIP:
            meta.remove_partition(tp)
        elif error in _MARKER_RETRY:
            retry.add(tp)
        elif error in _MARKER_CANCEL:
            return MarkerProgress(cancelled=True)
        else:
            raise IllegalStateTransition(
                f"transactional id {send.transactional_id}: marker for {tp} failed with "
                f"{error.name}, which no leader should answer"
            )
    if retry or meta.partitions:
        return MarkerProgress(retry=frozenset(retry))
    return MarkerProgress(write=_write(owner, meta, send.completion))


# -- timeouts and expiry --------------------------------------------------------------------
def timed_out(state: TxnCoordinatorState, now_ms: int) -> list[tuple[str, int]]:
    """(transactional id, producer id) of every open transaction past its timeout."""
    return [
        (meta.transactional_id, meta.producer_id)
        for owner in state.partitions.values()
        for meta in owner.transactions.values()
        if meta.pending is None
        and meta.state == S.ONGOING
        and meta.start_ms + meta.timeout_ms < now_ms
    ]


def abort_timed_out(
    state: TxnCoordinatorState, transactional_id: str, producer_id: int, now_ms: int
) -> Decision:
    """Abort a transaction past its timeout under a bumped epoch: its producer is fenced
    and learns it at its next request (PRODUCER_FENCED)."""
    found = state.lookup(transactional_id)
    if isinstance(found, ErrorCode):
        return Decision(found)
    owner, meta = found
    if meta is None or meta.producer_id != producer_id:
        return Decision(E.INVALID_PRODUCER_ID_MAPPING)
    if meta.pending is not None:
        return Decision(E.CONCURRENT_TRANSACTIONS)
    if meta.state != S.ONGOING:
        return Decision(E.INVALID_TXN_STATE)  # it ended meanwhile
    transit = meta.prepare_epoch_fence(now_ms)
    return Decision(write=_write(owner, meta, transit, then_markers=True))


def expire_transactional_ids(state: TxnCoordinatorState, now_ms: int) -> list[WriteState]:
    """Tombstones for ids with no open transaction, unchanged for
    transactional.id.expiration.ms; each id is dropped once its tombstone is written."""
    deadline = now_ms - state.config.id_expiration_ms
    writes = []
    for owner in state.partitions.values():
        for meta in owner.transactions.values():
            if (
                meta.pending is None
                and meta.state
                in (
                    S.EMPTY,
                    S.COMPLETE_COMMIT,
                    S.COMPLETE_ABORT,
                )
                and meta.update_ms <= deadline
            ):
                writes.append(_write(owner, meta, meta.prepare_dead()))
    return writes


# -- leadership of state partitions ----------------------------------------------------------
def begin_loading(state: TxnCoordinatorState, index: int) -> None:
    """This broker became leader of state partition `index`: answer its ids
    COORDINATOR_LOAD_IN_PROGRESS until `load_partition`."""
    state.partitions.pop(index, None)
    state.loading.add(index)


def load_partition(
    state: TxnCoordinatorState,
    index: int,
    coordinator_epoch: int,
    records: Iterable[tuple[bytes, bytes | None]],
    now_ms: int,
) -> list[SendMarkers]:
    """Rebuild the metadata of state partition `index` from its records (key, value) in
    log order: the last record of an id wins, a tombstone removes it, a key of an unknown
    version is skipped (as Kafka, a leftover of an aborted upgrade). Transactions found in
    PrepareCommit/PrepareAbort had their markers in flight when the old coordinator
    stopped: their markers are sent again (returned)."""
    latest: dict[str, TxnTransit | None] = {}
    for key, value in records:
        try:
            transactional_id = decode_key(key)
        except DecodeError:
            continue
        latest[transactional_id] = None if value is None else decode_value(value)
    owner = TxnPartition(index, coordinator_epoch)
    for transactional_id, transit in latest.items():
        if transit is not None:
            owner.transactions[transactional_id] = TxnMetadata.from_record(
                transactional_id, transit
            )
    state.partitions[index] = owner
    state.loading.discard(index)
    return [
        _markers(owner, meta, now_ms)
        for meta in owner.transactions.values()
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
    ]


def unload_partition(state: TxnCoordinatorState, index: int) -> None:
    """Leadership moved away: forget the partition; later answers say NOT_COORDINATOR."""
    state.partitions.pop(index, None)
    state.loading.discard(index)
