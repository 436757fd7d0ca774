"""A partition this broker hosts: its log, its leadership, ISR, high watermark, producers.

Leadership comes from the controller (LeaderAndIsr in a cluster, the local controller of
a single broker): `make_leader` / `make_follower`. As leader the partition tracks each
follower's log end (learnt from its fetches) and when it last caught up, proposes ISR
changes (the replica manager writes them to ZooKeeper and applies them here once written),
and moves the high watermark to the smallest log end over the ISR. As follower it
appends what the leader sent and takes the leader's high watermark, capped by its own
log end. Consumers only ever read below the high watermark
(docs/contracts/cluster.md, "Replication").

No I/O and no clock of its own: callers pass `now_ms`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from broker.cluster import NO_LEADER
from broker.log.log import KafkaStorageError, Log
from broker.log.txn_index import AbortedTxn
from broker.protocol.errors import ErrorCode
from broker.records.batch import CorruptRecordError, iter_batches
from broker.records.control import Marker, parse_marker
from broker.records.header import CONTROL, NO_PRODUCER_ID, BatchHeader, crc_is_valid
from broker.server.producer_state import (
    CompletedTxn,
    CorruptSnapshot,
    ProducerStateTable,
    decode_snapshot,
    encode_snapshot,
)

logger = logging.getLogger(__name__)


class AppendResult(NamedTuple):
    error: ErrorCode
    base_offset: int = -1
    log_append_time_ms: int = -1
    message: str | None = None
    # The offset after the appended records: acks=all waits for the high watermark here.
    next_offset: int = -1


@dataclass(frozen=True)
class Leadership:
    """What the controller decided for one partition (a LeaderAndIsr partition state)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    zk_version: int = 0
    controller_epoch: int = 0


@dataclass
class Follower:
    """What the leader knows of one follower replica."""

    log_end_offset: int = -1  # unknown until its first fetch
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    # The leader's log end when the follower's previous fetch was answered: a follower
    # that reached it by its next fetch was caught up at that earlier time.
    leader_end_at_last_fetch: int = -1
    # The fetch session (broker/server/fetch_session.py) its fetches come through: an
    # incremental fetch leaves out a partition whose fetch offset did not change, so a
    # follower at the log end was caught up at its session's last fetch.
    session: Any = None


def _markers(records, batches: list[tuple[int, BatchHeader]]) -> list[Marker | None]:
    """The transaction marker of each control batch of `records` (None for the others)."""
    return [parse_marker(records, pos, h) if h.attributes & CONTROL else None for pos, h in batches]


# Compared with at every append (an enum member's lookup is not free).
_NONE = ErrorCode.NONE


class Partition:
    def __init__(
        self,
        log: Log,
        broker_id: int,
        leader_epoch: int | None = None,
        high_watermark: int | None = None,
        retain_batches: int = 5,
    ) -> None:
        self.log = log
        self.broker_id = broker_id
        self.leader_id = NO_LEADER  # not decided until the controller says
        # Leader epochs never decrease, across restarts too (librdkafka ignores metadata
        # with a lower one): by default, the last epoch that appended to the log (0 for a
        # log nothing was appended to). The log records it with the first append.
        if leader_epoch is None:
            leader_epoch = max(log.leader_epochs.latest_epoch(), 0)
        self.leader_epoch = leader_epoch
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        # An ISR change sent to ZooKeeper and not confirmed yet (only one at a time).
        self.pending_isr: tuple[int, ...] | None = None
        self.zk_version = -1
        self.controller_epoch = -1
        self.followers: dict[int, Follower] = {}
        # The log end when this broker became leader of the current epoch: a follower
        # must reach it before it may join the ISR (it has the whole previous epoch).
        self.leader_epoch_start_offset = -1
        hw = log.log_end_offset if high_watermark is None else high_watermark
        self.high_watermark = max(log.log_start_offset, min(hw, log.log_end_offset))
        self.producers = ProducerStateTable(retain_batches)
        self._rebuild_producers(log.opened_recovery_point)
        # Its .txnindex is whole now: a later load (a Partition made again) may start
        # from any snapshot.
        log.opened_recovery_point = log.log_end_offset
        log.producer_snapshot = lambda: encode_snapshot(self.producers)
        # Told (topic, partition) whenever the high watermark moves: completes waiting
        # fetches and acks=all produces.
        self.on_high_watermark: Callable[[str, int], None] = lambda topic, partition: None
        # Told whenever its ISR or leadership is set (ReplicaManager keeps, per follower,
        # the partitions led here whose ISR lacks it).
        self.on_isr: Callable[[Partition], None] = lambda partition: None

    @property
    def topic(self) -> str:
        return self.log.topic

    @property
    def index(self) -> int:
        return self.log.partition

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    # -- leadership ---------------------------------------------------------------------
    def make_leader(self, state: Leadership, now_ms: int) -> None:
        """Become (or stay) leader of `state.leader_epoch`. Followers in the ISR count as
        caught up now, so none leaves the ISR before it had a chance to fetch."""
        new_epoch = state.leader_epoch != self.leader_epoch or not self.is_leader
        self._take(state)
        if new_epoch:
            self.leader_epoch_start_offset = self.log.log_end_offset
            # Kafka records the epoch at its start offset as soon as it leads, so followers
            # asking OffsetForLeaderEpoch find it before the first append.
            self.log.leader_epochs.assign(state.leader_epoch, self.log.log_end_offset)
            self.followers = {
                r: Follower(last_caught_up_ms=now_ms if r in state.isr else 0)
                for r in state.replicas
                if r != self.broker_id
            }
        else:  # same epoch (a controller re-sending): keep what followers told us
            self.followers = {
                r: self.followers.get(r) or Follower()
                for r in state.replicas
                if r != self.broker_id
            }
        self.maybe_advance_high_watermark()
        self.on_isr(self)

    def make_follower(self, state: Leadership) -> None:
        """Follow `state.leader`; the replica fetcher truncates and fetches from there."""
        self._take(state)
        self.followers = {}
        self.leader_epoch_start_offset = -1
        self.on_isr(self)

    def _take(self, state: Leadership) -> None:
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.isr = tuple(state.isr)
        self.replicas = tuple(state.replicas)
        self.zk_version = state.zk_version
        self.controller_epoch = state.controller_epoch
        self.pending_isr = None

    # -- appends ------------------------------------------------------------------------
    def append_as_leader(
        self,
        records: bytearray,
        batches: list[tuple[int, BatchHeader]],
        now_ms: int,
        acks: int = 1,
    ) -> AppendResult:
        """Append validated batches unless leadership, the ISR size (acks=all) or a
        producer sequence says otherwise.

        A request carries one batch per partition from the clients we serve; if it
        carries several, every batch is checked before any is written, so a refused
        request leaves the log untouched.
        """
        log = self.log
        if log.offline:
            return AppendResult(*self.storage_error())
        if self.leader_id != self.broker_id:
            return AppendResult(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                message=f"broker {self.broker_id} is not the leader (leader: {self.leader_id})",
            )
        config = log.config
        if acks == -1 and len(self.isr) < config.min_insync_replicas:
            return AppendResult(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                message=f"the ISR {list(self.isr)} is smaller than min.insync.replicas "
                f"{config.min_insync_replicas}",
            )
        # A batch of no producer (producer id -1: not idempotent) has no sequence to check
        # and no state to record: the common unbatched produce skips both loops.
        stateful = len(batches) > 1 or batches[0][1].producer_id != NO_PRODUCER_ID
        pairs = list(zip(batches, _markers(records, batches), strict=True)) if stateful else ()
        check = self.producers.check
        for (_, header), marker in pairs:
            verdict = check(header, marker)
            if not verdict.error:
                continue
            if verdict.error == ErrorCode.DUPLICATE_SEQUENCE_NUMBER and len(batches) == 1:
                # A retry of a batch already in the log: answer with its original offset.
                original = verdict.duplicate_of
                return AppendResult(
                    ErrorCode.NONE,
                    original.first_offset,
                    next_offset=original.first_offset + header.last_offset_delta + 1,
                )
            return AppendResult(
                verdict.error,
                message=f"producer {header.producer_id} sequence "
                f"{header.base_sequence} epoch {header.producer_epoch} refused",
            )
        append_time = now_ms if config.log_append_time else None
        try:
            info = log.append(records, batches, self.leader_epoch, append_time)
        except KafkaStorageError as exc:  # its log dir is offline now; nothing acknowledged
            return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, message=str(exc))
        offset = info.first_offset
        record = self.producers.record
        for (_, header), marker in pairs:
            completed = record(header, offset, now_ms, marker)
            if completed is not None:
                self._transaction_ended(completed)
            offset += header.last_offset_delta + 1
        self.maybe_advance_high_watermark()
        return AppendResult(
            _NONE,
            info.first_offset,
            -1 if append_time is None else now_ms,
            None,
            info.last_offset + 1,
        )

    def append_as_follower(self, data, now_ms: int) -> int:
        """Append the whole batches of fetched `data` (a trailing partial batch is left
        for the next fetch) and record their producers, as the leader did, so that a
        retried batch is still answered as a duplicate after a failover. Returns the
        number of bytes appended."""
        buf = bytearray(data)
        log_end = self.log.log_end_offset
        batches = [(pos, h) for pos, h in iter_batches(buf) if h.next_offset > log_end]
        if not batches:
            return 0
        for pos, header in batches:
            if not crc_is_valid(buf, pos, header):
                raise CorruptRecordError(
                    f"{self.topic}-{self.index}: batch at offset {header.base_offset} from the "
                    "leader fails its CRC"
                )
        start, end = batches[0][0], batches[-1][0] + batches[-1][1].size
        self.log.append_as_follower(
            memoryview(buf)[start:end], [(pos - start, header) for pos, header in batches]
        )
        record = self.producers.record
        for (_, header), marker in zip(batches, _markers(buf, batches), strict=True):
            if header.producer_id != NO_PRODUCER_ID:  # (no state kept for no producer)
                self._transaction_ended(record(header, header.base_offset, now_ms, marker))
        return end - start

    def storage_error(self) -> tuple[ErrorCode, str]:
        """The answer for a partition whose log dir is offline (docs/contracts/log.md,
        "Log directory failure")."""
        return (
            ErrorCode.KAFKA_STORAGE_ERROR,
            f"{self.topic}-{self.index}: log dir {self.log.dir.parent} of broker "
            f"{self.broker_id} is offline",
        )

    def _transaction_ended(self, completed: CompletedTxn | None) -> None:
        """A marker closed a transaction (leader and follower alike): an aborted one goes
        in the aborted-transaction index, which read_committed fetches consult."""
        if completed is not None and completed.aborted:
            self.log.add_aborted_txn(
                AbortedTxn(
                    completed.producer_id,
                    completed.first_offset,
                    completed.last_offset,
                    completed.last_stable_offset,
                )
            )

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided: the first offset of the oldest open
        transaction, capped by the high watermark (what read_committed consumers read)."""
        first = self.producers.first_unstable_offset()
        if first is None:
            return self.high_watermark
        # A transaction whose start retention deleted holds nothing below the log start
        # (Kafka moves the first unstable offset up to it too).
        return min(max(first, self.log.log_start_offset), self.high_watermark)

    def truncate_to(self, offset: int) -> None:
        """Drop everything at and after `offset` (a follower diverging from its leader)."""
        if offset >= self.log.log_end_offset:
            return
        self.log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self._rebuild_producers()

    def start_over_at(self, offset: int) -> None:
        """Drop the whole log and continue at `offset` (a follower behind its leader's log
        start): no producer or transaction of the old log is left."""
        self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset
        self.producers = ProducerStateTable(self.producers.retain_batches)

    def _rebuild_producers(self, up_to: int | None = None) -> None:
        """Producer state from the newest readable snapshot and the batches after it, or
        from the whole log when there is none (docs/contracts/log.md, "Producer-state
        snapshots"); the aborted transactions found are indexed again where a crash or a
        truncation lost their entries. `up_to`: the newest snapshot allowed (at start-up
        the recovery point, above which those entries may be missing)."""
        retain = self.producers.retain_batches
        table, replay_from = ProducerStateTable(retain), self.log.log_start_offset
        for offset, data in self.log.producer_snapshots(up_to):
            try:
                table, replay_from = decode_snapshot(data, retain), offset
                break
            except CorruptSnapshot as exc:
                logger.warning("%s: producer snapshot at %d is corrupt (%s)", self.log, offset, exc)
                self.log.drop_producer_snapshot(offset)
        else:
            if self.log.log_end_offset > replay_from:
                logger.info("%s: no producer snapshot: reading the whole log", self.log)
        self.producers = table
        for completed in table.rebuild(self.log.batches_from(replay_from)):
            self._transaction_ended(completed)

    # -- the ISR and the high watermark (leader) ----------------------------------------
    def record_follower_fetch(
        self, replica_id: int, fetch_offset: int, now_ms: int, session: Any = None
    ) -> None:
        """A follower fetched from `fetch_offset`: everything below it is on its log."""
        follower = self.followers.get(replica_id)
        if follower is None or not self.is_leader:
            return
        follower.session = session
        end = self.log.log_end_offset
        if fetch_offset >= end:
            follower.last_caught_up_ms = now_ms
        elif fetch_offset >= follower.leader_end_at_last_fetch >= 0:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.log_end_offset = min(fetch_offset, end)
        follower.leader_end_at_last_fetch = end
        follower.last_fetch_ms = now_ms
        self.maybe_advance_high_watermark()

    def isr_expansion(self) -> tuple[int, ...] | None:
        """The ISR with every follower that has caught up added (it holds the high
        watermark and the whole current epoch), or None when nothing changes."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        joining = [
            r
            for r, f in self.followers.items()
            if r not in self.isr
            and f.log_end_offset >= self.high_watermark
            and f.log_end_offset >= self.leader_epoch_start_offset
        ]
        return tuple(sorted((*self.isr, *joining))) if joining else None

    def isr_shrink(self, now_ms: int, max_lag_ms: int) -> tuple[int, ...] | None:
        """The ISR without the followers that have not caught up for `max_lag_ms`, or None."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        lagging = {
            r
            for r in self.isr
            if r != self.broker_id
            and now_ms - self._caught_up_ms(self.followers.get(r, Follower())) > max_lag_ms
        }
        return tuple(r for r in self.isr if r not in lagging) if lagging else None

    def _caught_up_ms(self, follower: Follower) -> int:
        if follower.session is not None and follower.log_end_offset >= self.log.log_end_offset:
            return max(follower.last_caught_up_ms, follower.session.last_used_ms)
        return follower.last_caught_up_ms

    def propose_isr(self, isr: tuple[int, ...]) -> None:
        """An ISR change is being written: until it is confirmed, the high watermark waits
        for the larger of the two sets (never ahead of a replica that may count)."""
        self.pending_isr = isr

    def apply_isr(self, isr: tuple[int, ...], zk_version: int) -> None:
        """The ISR change was written (the state znode is now at `zk_version`)."""
        self.isr = tuple(isr)
        self.zk_version = zk_version
        self.pending_isr = None
        self.maybe_advance_high_watermark()
        self.on_isr(self)

    def abandon_isr_change(self) -> None:
        """The write lost to a newer state (a controller decision): forget the proposal."""
        self.pending_isr = None

    def maybe_advance_high_watermark(self) -> bool:
        """Leader: the smallest log end over the ISR (and a pending ISR), never backwards."""
        if self.leader_id != self.broker_id:
            return False
        # Called at every append and every follower fetch: no set or list built for it.
        me, followers = self.broker_id, self.followers
        hw = self.log.log_end_offset
        for counted in (self.isr, self.pending_isr or ()):
            for replica in counted:
                if replica != me:
                    follower = followers.get(replica)
                    end = follower.log_end_offset if follower is not None else -1
                    if end < hw:
                        hw = end
        return self._set_high_watermark(hw)

    def replication_outcome(self, next_offset: int) -> tuple[ErrorCode, str | None] | None:
        """Where an acks=all append ending before `next_offset` stands: None while some
        in-sync replica lacks it; NONE once the high watermark passed it; an error when
        leadership moved meanwhile, or the ISR shrank below min.insync.replicas."""
        if self.log.offline:
            return self.storage_error()
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, "leadership moved while waiting"
        if self.high_watermark < next_offset:
            return None
        min_isr = self.log.config.min_insync_replicas
        if len(self.isr) < min_isr:
            return (
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                f"the ISR {list(self.isr)} shrank below min.insync.replicas {min_isr} "
                "after the append",
            )
        return ErrorCode.NONE, None

    def follower_high_watermark(self, leader_high_watermark: int) -> bool:
        """Follower: the leader's high watermark, capped by what we have."""
        return self._set_high_watermark(min(leader_high_watermark, self.log.log_end_offset))

    def _set_high_watermark(self, new_hw: int) -> bool:
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            self.on_high_watermark(self.topic, self.index)
            return True
        return False

    def under_replicated(self) -> bool:
        return self.is_leader and len(self.isr) < len(self.replicas)
