"""The transaction coordinator of a broker: the pure core (coordinator.py) carried out.

What the decisions ask for happens here (docs/contracts/transactions.md):
- `WriteState`: the record is appended to its `__transaction_state` partition with
  acks=all (broker/server/appends.py: the wait is a DelayedAppend in the produce
  purgatory), then `record_written` decides; the request's answer is a `Waiter`
  completed with that decision.
- `SendMarkers`: handed to the `MarkerSender` (markers.py), which reports back here.
- leadership of the state partitions (the replica manager's listeners): a partition led
  here is loaded from its start (its ids answer COORDINATOR_LOAD_IN_PROGRESS meanwhile),
  and what it finds in PrepareCommit/PrepareAbort has its markers sent again; a
  partition no longer led is forgotten (NOT_COORDINATOR).
- the timers, called by the broker's duties (broker/server/duties.py): open transactions
  past their timeout are aborted, idle ids expire.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from broker.coordinator.coordinator import Waiter
from broker.log.loading import read_batches
from broker.protocol.errors import ErrorCode
from broker.records.batch import build_batch, decode_batch
from broker.server.appends import append_records
from broker.transactions import coordinator as core
from broker.transactions.coordinator import Decision, SendMarkers, TxnConfig, TxnCoordinatorState
from broker.transactions.state_topic import TRANSACTION_STATE_TOPIC, partition_for
from broker.util.purgatory import DelayedOperation

log = logging.getLogger(__name__)

# How long a state write waits for the in-sync replicas (Kafka's coordinator uses the
# broker's request timeout, 30 s by default); past it the client is told
# COORDINATOR_NOT_AVAILABLE and retries.
WRITE_TIMEOUT_MS = 30000
# Bytes read per step when loading a state partition; other requests are served between
# steps (as the group coordinator's `offsets.load.buffer.size`).
LOAD_CHUNK_BYTES = 1 << 20
# A completion record that could not be written (no ISR) is tried again after this long.
RETRY_BACKOFF_MS = 100

Answer = Decision | DelayedOperation


class TransactionManager:
    """The coordinator's state for the state partitions led here, and its effects."""

    def __init__(self, ctx, config: TxnConfig) -> None:
        self.ctx = ctx
        self.config = config
        self.state = TxnCoordinatorState(config)
        # FindCoordinator is creating __transaction_state (once at a time).
        self.creating_topic = False
        # partition -> the leader epoch being loaded (a newer leadership restarts it)
        self._loading_epoch: dict[int, int] = {}
        from broker.transactions.markers import MarkerSender

        self.markers = MarkerSender(ctx, self)
        # The produce path's questions to coordinators (KIP-890 part 1), on the same
        # connections as the markers.
        from broker.transactions.verifier import PartitionVerifier

        self.verifier = PartitionVerifier(ctx, config.state_partitions, self.markers.peers)

    # -- which ids are ours -------------------------------------------------------------
    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.state_partitions)

    # -- the APIs ------------------------------------------------------------------------
    def init_producer_id(
        self, req: core.InitProducerIdRequest, new_producer_id: Callable[[], int]
    ) -> Answer:
        now = self.ctx.now_ms()
        return self.carry_out(core.init_producer_id(self.state, req, now, new_producer_id))

    def add_partitions(self, req: core.AddPartitionsRequest, partition_exists, topic_authorized):
        now = self.ctx.now_ms()
        decision = core.add_partitions(self.state, req, now, partition_exists, topic_authorized)
        return self.carry_out(decision)

    def verify_partitions(self, req: core.AddPartitionsRequest) -> Decision:
        return core.verify_partitions(self.state, req)

    def add_offsets(self, req: core.AddOffsetsRequest) -> Answer:
        return self.carry_out(core.add_offsets(self.state, req, self.ctx.now_ms()))

    def end_txn(self, req: core.EndTxnRequest, new_producer_id: Callable[[], int]) -> Answer:
        now = self.ctx.now_ms()
        return self.carry_out(core.end_txn(self.state, req, now, new_producer_id))

    # -- carrying decisions out -------------------------------------------------------------
    def carry_out(self, decision: Decision) -> Answer:
        """The answer now, or a Waiter completed with the decision that follows the
        write `decision` asks for."""
        if decision.markers is not None:
            self.markers.add(decision.markers)
        if decision.write is None:
            return decision
        waiter = Waiter()
        self.write(decision.write, waiter.complete)
        return waiter

    def write(
        self, write: core.WriteState, on_done: Callable[[Decision], object] | None = None
    ) -> None:
        """Append `write`'s record with acks=all; `record_written` decides what follows."""
        key, value = write.encode()
        now = self.ctx.now_ms()
        batch = build_batch([(key, value, now, ())])
        operation = append_records(
            self.ctx, TRANSACTION_STATE_TOPIC, write.partition, batch, WRITE_TIMEOUT_MS
        )

        def done(outcome) -> None:
            code = outcome[0] if isinstance(outcome, tuple) else ErrorCode.UNKNOWN_SERVER_ERROR
            if code != ErrorCode.NONE:
                log.warning(
                    "writing transactional id %s (%s) to %s-%d failed: %s %s",
                    write.transactional_id,
                    write.transit.state.kafka_name,
                    TRANSACTION_STATE_TOPIC,
                    write.partition,
                    code.name,
                    outcome[1] if isinstance(outcome, tuple) and outcome[1] else "",
                )
            decision = core.record_written(self.state, write, code, self.ctx.now_ms())
            if decision.markers is not None:
                self.markers.add(decision.markers)
            if decision.write is not None:  # the markers are out: the completion must land
                self._later(RETRY_BACKOFF_MS, lambda: self.write(decision.write))
            if on_done is not None:
                on_done(decision)

        operation.add_done_callback(done)

    def _later(self, delay_ms: int, action: Callable[[], object]) -> None:
        async def run() -> None:
            await asyncio.sleep(delay_ms / 1000)
            action()

        self.ctx.spawn(run())

    def markers_answered(self, send: SendMarkers, errors) -> core.MarkerProgress:
        """A leader's answer to markers (from the MarkerSender); writes the completion
        once no marker is left."""
        progress = core.markers_answered(self.state, send, errors)
        if progress.write is not None:
            self.write(progress.write)
        return progress

    # -- timers (broker duties) -------------------------------------------------------------
    def abort_timed_out(self) -> int:
        """Abort every open transaction past its timeout; returns how many."""
        now = self.ctx.now_ms()
        aborted = 0
        for transactional_id, producer_id in core.timed_out(self.state, now):
            decision = core.abort_timed_out(self.state, transactional_id, producer_id, now)
            if decision.write is not None:
                log.info(
                    "aborting the transaction of %s (producer id %d): past its timeout",
                    transactional_id,
                    producer_id,
                )
                self.carry_out(decision)
                aborted += 1
        return aborted

    def expire_transactional_ids(self) -> int:
        writes = core.expire_transactional_ids(self.state, self.ctx.now_ms())
        for write in writes:
            self.write(write)
        return len(writes)

    # -- leadership of state partitions -------------------------------------------------------
    def leadership_changed(self, topic: str, index: int) -> None:
        if topic != TRANSACTION_STATE_TOPIC:
            return
        partition = self.ctx.replicas.get(topic, index)
        if partition is not None and partition.is_leader:
            if index in self.state.partitions or index in self._loading_epoch:
                return  # still the leader under a newer epoch: memory is current
            epoch = partition.leader_epoch
            self._loading_epoch[index] = epoch
            core.begin_loading(self.state, index)
            self.ctx.spawn(self._load(index, epoch))
        else:
            self._loading_epoch.pop(index, None)
            if index in self.state.partitions:
                log.info("unloaded the transactions of %s-%d", TRANSACTION_STATE_TOPIC, index)
            core.unload_partition(self.state, index)

    async def _load(self, index: int, epoch: int) -> None:
        try:
            records = await self._read_partition(index, epoch)
        except Exception:
            log.exception(
                "loading %s-%d failed; its ids stay unavailable until its next leadership",
                TRANSACTION_STATE_TOPIC,
                index,
            )
            if self._loading_epoch.get(index) == epoch:
                del self._loading_epoch[index]
            return
        if self._loading_epoch.get(index) != epoch:
            return  # lost or re-won leadership while reading: that load decides
        del self._loading_epoch[index]
        resend = core.load_partition(self.state, index, epoch, records, self.ctx.now_ms())
        for send in resend:
            self.markers.add(send)
        log.info(
            "loaded %d transactional ids from %s-%d (coordinator epoch %d, %d to complete)",
            len(self.state.partitions[index].transactions),
            TRANSACTION_STATE_TOPIC,
            index,
            epoch,
            len(resend),
        )

    async def _read_partition(self, index: int, epoch: int) -> list[tuple[bytes, bytes | None]]:
        """Every (key, value) of the partition's data records in log order."""
        records: list[tuple[bytes, bytes | None]] = []

        def current_log():
            partition = self.ctx.replicas.get(TRANSACTION_STATE_TOPIC, index)
            return None if partition is None else partition.log

        batches = read_batches(
            current_log, lambda: self._loading_epoch.get(index) == epoch, LOAD_CHUNK_BYTES
        )
        async for batch in batches:
            if batch.header.is_control:
                continue
            for record in decode_batch(batch.data, batch.pos)[1]:
                if record.key is not None:
                    value = None if record.value is None else bytes(record.value)
                    records.append((bytes(record.key), value))
        return records


def start_transaction_coordinator(ctx) -> TransactionManager:
    """The transaction coordinator of a broker (`ctx`: its BrokerContext), following the
    leadership of the state partitions here from now on."""
    manager = TransactionManager(ctx, TxnConfig.from_broker_config(ctx.config))
    ctx.replicas.leadership_listeners.append(manager.leadership_changed)
    return manager
