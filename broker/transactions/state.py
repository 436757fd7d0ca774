"""A transactional id as its coordinator sees it: producer id, epoch, state, partitions.

The states and moves are Kafka's (KIP-98; docs/contracts/transactions.md):

    Empty/Complete* --AddPartitions/AddOffsets--> Ongoing --EndTxn(commit)--> PrepareCommit
    Ongoing --EndTxn(abort)--> PrepareAbort        Prepare* --all markers written--> Complete*
    Ongoing --InitProducerId / timeout--> PrepareEpochFence --> PrepareAbort (epoch bumped)
    Empty/Complete* --InitProducerId--> Empty (epoch bumped)     Empty/Complete* --expired--> Dead

`TRANSITIONS` is that picture as a table (target -> states it may be reached from); a move
not in it is a bug in the coordinator and raises at once.

Every change is written to `__transaction_state` before it takes effect, so a change is
two steps, as in Kafka: `prepare_*` checks the move, marks it pending and returns the
`TxnTransit` to write; once the record is replicated, `complete(transit)` applies it (or
`abandon_pending()` drops it when the write failed). While a change is pending no other
may start: the coordinator answers CONCURRENT_TRANSACTIONS, and the client retries.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
INT16_MAX = 0x7FFF
# The transaction.version a transaction's client used (Kafka's TransactionVersion): from 2
# on (KIP-890 part 2) every transaction end bumps the producer epoch.
TV_EPOCH_BUMP = 2

TopicPartition = tuple[str, int]


class TxnState(enum.IntEnum):
    """The states, numbered as Kafka's `TransactionStatus` byte in the state records."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions show ("PrepareCommit")."""
        return "".join(word.capitalize() for word in self.name.split("_"))


_S = TxnState
# target state -> the states a transactional id may move to it from (Kafka's
# validPreviousStates)
TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}

# No transaction open: the id may expire after transactional.id.expiration.ms idle.
EXPIRABLE = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})


class IllegalStateTransition(RuntimeError):
    pass


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch (32767) back so a producer can always be fenced: at
    32766 the next InitProducerId starts a new producer id instead."""
    return epoch >= INT16_MAX - 1


@dataclass(frozen=True)
class TxnTransit:
    """A change about to be written: what the metadata becomes once it is replicated."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    update_ms: int
    # Transaction version 2: the producer id the completion moves to when this end used
    # the last epoch (else -1), and the client's transaction version.
    next_producer_id: int = NO_PRODUCER_ID
    client_tv: int = 0


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1  # when the open transaction added its first partition
    update_ms: int = -1  # last change; the expiry of the id counts from here
    next_producer_id: int = NO_PRODUCER_ID
    client_tv: int = 0  # the transaction version of the client of the last change
    pending: TxnState | None = None
    # The record of an epoch fence failed to write, but the bumped epoch stayed in memory:
    # the next fence must not bump again (the client never saw this epoch).
    failed_epoch_fence: bool = False
    _pending_is_fence: bool = False

    # -- the table ----------------------------------------------------------------------
    def prepare_transition(
        self,
        target: TxnState,
        *,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        last_producer_epoch: int | None = None,
        timeout_ms: int | None = None,
        partitions: frozenset[TopicPartition] | None = None,
        start_ms: int | None = None,
        update_ms: int,
        next_producer_id: int = NO_PRODUCER_ID,
        client_tv: int = 0,
    ) -> TxnTransit:
        """Check the move against `TRANSITIONS`, mark it pending, return what to write.
        Fields not given keep their current value, except the next producer id and the
        client's transaction version, which each move states (as Kafka)."""
        if self.pending is not None:
            raise IllegalStateTransition(
                f"transactional id {self.transactional_id}: {target.kafka_name} prepared while "
                f"{self.pending.kafka_name} is still pending"
            )
        if self.state not in TRANSITIONS[target]:
            raise IllegalStateTransition(
                f"transactional id {self.transactional_id}: {self.state.kafka_name} -> "
                f"{target.kafka_name} is not a move a transaction can make"
            )
        transit = TxnTransit(
            producer_id=self.producer_id if producer_id is None else producer_id,
            last_producer_id=self.producer_id,
            producer_epoch=self.producer_epoch if producer_epoch is None else producer_epoch,
            last_producer_epoch=(
                self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch
            ),
            timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms,
            state=target,
            partitions=frozenset(self.partitions) if partitions is None else partitions,
            start_ms=self.start_ms if start_ms is None else start_ms,
            update_ms=update_ms,
            next_producer_id=next_producer_id,
            client_tv=client_tv,
        )
        if transit.producer_id < 0:
            raise ValueError(f"illegal producer id {transit.producer_id}")
        if target != TxnState.DEAD and transit.producer_epoch < 0:
            raise ValueError(f"illegal producer epoch {transit.producer_epoch}")
        self.pending = target
        return transit

    # -- the moves the coordinator makes ---------------------------------------------------
    def prepare_epoch_bump(
        self, timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransit | None:
        """InitProducerId on an id with no open transaction: the next epoch, the
        partitions cleared. With the epoch the producer had (KIP-360), a retry of a bump
        that succeeded gets the same epoch again; None: the producer is fenced."""
        if is_epoch_exhausted(self.producer_epoch):
            raise IllegalStateTransition(f"producer id {self.producer_id}: epochs exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self.prepare_transition(
            TxnState.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            update_ms=now_ms,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransit:
        """The epochs of this producer id are used up: start a new id at epoch 0."""
        if self.state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise IllegalStateTransition("cannot rotate the producer id of an open transaction")
        return self.prepare_transition(
            TxnState.EMPTY,
            producer_id=new_producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            update_ms=now_ms,
        )

    def prepare_add_partitions(
        self, added: frozenset[TopicPartition], now_ms: int, client_tv: int = 0
    ) -> TxnTransit:
        """`client_tv`: 2 when a transaction version 2 Produce adds the partition; the
        transaction's end then bumps the epoch."""
        opening = self.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        return self.prepare_transition(
            TxnState.ONGOING,
            partitions=frozenset(self.partitions) | added,
            start_ms=now_ms if opening else self.start_ms,
            update_ms=now_ms,
            client_tv=client_tv,
        )

    @property
    def bumps_at_end(self) -> bool:
        """The open transaction's client speaks transaction version 2 (KIP-890 part 2)."""
        return self.client_tv >= TV_EPOCH_BUMP

    def prepare_end(
        self,
        commit: bool,
        now_ms: int,
        client_tv: int = 0,
        next_producer_id: int = NO_PRODUCER_ID,
    ) -> TxnTransit:
        """PrepareCommit/PrepareAbort. With transaction version 2 the epoch is bumped now,
        so the markers carry the new one and fence every batch of the ended transaction;
        `next_producer_id` (the epoch reached 32767): the id the completion moves to."""
        target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if client_tv < TV_EPOCH_BUMP:
            return self.prepare_transition(target, update_ms=now_ms)
        if self.producer_epoch >= INT16_MAX:
            raise IllegalStateTransition(f"producer id {self.producer_id}: cannot bump epoch")
        return self.prepare_transition(
            target,
            producer_epoch=self.producer_epoch + 1,
            last_producer_epoch=self.producer_epoch,
            update_ms=now_ms,
            next_producer_id=next_producer_id,
            client_tv=client_tv,
        )

    def prepare_epoch_fence(self, now_ms: int) -> TxnTransit:
        """Abort the open transaction under a bumped epoch, so its producer is fenced (a
        new producer's InitProducerId, or the transaction timed out). Kafka passes through
        PrepareEpochFence without writing it: the bumped epoch goes straight into memory
        and the PrepareAbort record carries it."""
        if self.producer_epoch == INT16_MAX:
            raise IllegalStateTransition(f"producer id {self.producer_id}: cannot fence epoch")
        bumped = self.producer_epoch if self.failed_epoch_fence else self.producer_epoch + 1
        self.prepare_transition(TxnState.PREPARE_EPOCH_FENCE, update_ms=now_ms)
        # The fence is never completed on its own: it becomes the abort at once.
        self.pending = None
        self.producer_epoch, self.last_producer_epoch = bumped, NO_PRODUCER_EPOCH
        state, self.state = self.state, TxnState.PREPARE_EPOCH_FENCE
        try:
            transit = self.prepare_transition(TxnState.PREPARE_ABORT, update_ms=now_ms)
        finally:
            self.state = state
        self._pending_is_fence = True
        return transit

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """Every partition has its marker: Complete*, the partitions cleared."""
        target = (
            TxnState.COMPLETE_COMMIT
            if self.state == TxnState.PREPARE_COMMIT
            else TxnState.COMPLETE_ABORT
        )
        self.failed_epoch_fence = False
        if not self.bumps_at_end:
            return self.prepare_transition(target, partitions=frozenset(), update_ms=now_ms)
        producer_id, epoch = self.producer_id, self.producer_epoch
        if self.next_producer_id != NO_PRODUCER_ID:
            # The end used the last epoch: the producer continues under the new id.
            producer_id, epoch = self.next_producer_id, 0
        return self.prepare_transition(
            target,
            producer_id=producer_id,
            producer_epoch=epoch,
            last_producer_epoch=self.producer_epoch,
            partitions=frozenset(),
            update_ms=now_ms,
            client_tv=self.client_tv,
        )

    def prepare_dead(self) -> TxnTransit:
        return self.prepare_transition(
            TxnState.DEAD, partitions=frozenset(), update_ms=self.update_ms
        )

    # -- after the write ------------------------------------------------------------------
    def complete(self, transit: TxnTransit) -> None:
        """The record of `transit` is replicated: it takes effect."""
        if self.pending is None or self.pending != transit.state:
            raise IllegalStateTransition(
                f"transactional id {self.transactional_id}: completing "
                f"{transit.state.kafka_name} but "
                f"{self.pending.kafka_name if self.pending else 'nothing'} is pending"
            )
        if transit.state in (TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD):
            # A fence becomes an abort before it is written; a dead id is dropped, not kept.
            raise IllegalStateTransition(f"{transit.state.kafka_name} is never completed")
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.partitions = set(transit.partitions)
        self.start_ms = transit.start_ms
        self.update_ms = transit.update_ms
        self.next_producer_id = transit.next_producer_id
        self.client_tv = transit.client_tv
        self.state = transit.state
        self.pending = None
        self._pending_is_fence = False

    def abandon_pending(self) -> None:
        """The record was not written: the change never happened (a fence keeps its bumped
        epoch in memory and remembers not to bump it again)."""
        if self._pending_is_fence:
            self.failed_epoch_fence = True
        self.pending = None
        self._pending_is_fence = False

    def remove_partition(self, tp: TopicPartition) -> None:
        """Its marker is written (or can never be): no longer waited for."""
        if self.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise IllegalStateTransition(
                f"transactional id {self.transactional_id}: removing a partition in "
                f"{self.state.kafka_name}"
            )
        self.partitions.discard(tp)

    def current(self) -> TxnTransit:
        """The metadata as it stands, in the shape of a record."""
        return TxnTransit(
            self.producer_id,
            self.last_producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            self.state,
            frozenset(self.partitions),
            self.start_ms,
            self.update_ms,
            self.next_producer_id,
            self.client_tv,
        )

    @classmethod
    def from_record(cls, transactional_id: str, transit: TxnTransit) -> TxnMetadata:
        return cls(
            transactional_id,
            transit.producer_id,
            transit.last_producer_id,
            transit.producer_epoch,
            transit.last_producer_epoch,
            transit.timeout_ms,
            transit.state,
            set(transit.partitions),
            transit.start_ms,
            transit.update_ms,
            transit.next_producer_id,
            transit.client_tv,
        )
