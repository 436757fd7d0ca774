"""Records the broker writes itself (the group coordinator's offsets and group metadata),
with what a Produce with acks=all promises: appended as leader, done once every in-sync
replica has them (the high watermark passed them), failed if leadership moves or the
ISR shrinks below min.insync.replicas meanwhile, or the deadline comes first.

Kafka's coordinators use the replica manager's append path the same way; here the
waiting is a `DelayedAppend` in the produce purgatory, keyed by the partition, so the
events that answer acks=all produces (high watermark moves, leadership changes) finish
these too.
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.records.header import parse_header
from broker.util.purgatory import DelayedOperation

Outcome = tuple[ErrorCode, "str | None"]


def replication_outcome(broker, tp: tuple[str, int], next_offset: int) -> Outcome | None:
    """An acks=all append to `tp` ending before `next_offset`: None while waiting, else
    its outcome (see Partition.replication_outcome); a partition gone is not led."""
    partition = broker.replicas.get(*tp)
    if partition is None:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, "the partition is no longer hosted here"
    return partition.replication_outcome(next_offset)


class DelayedAppend(DelayedOperation):
    """Completes with the Outcome of one append."""

    def __init__(self, broker, tp: tuple[str, int], next_offset: int, deadline_ms: int):
        super().__init__(deadline_ms, [tp])
        self.broker = broker
        self.tp = tp
        self.next_offset = next_offset

    def try_complete(self, now_ms: int) -> bool:
        outcome = replication_outcome(self.broker, self.tp, self.next_offset)
        return outcome is not None and self.complete(outcome)

    def on_expiration(self, now_ms: int) -> Outcome:
        return ErrorCode.REQUEST_TIMED_OUT, "the in-sync replicas did not confirm in time"


class _Done(DelayedOperation):
    def __init__(self, outcome: Outcome) -> None:
        super().__init__(0, ())
        self.complete(outcome)


def append_records(broker, topic: str, partition: int, batch: bytes, timeout_ms: int):
    """Append one record batch to a partition this broker leads; the returned operation
    completes with (error code, message) once it is replicated, or why it is not."""
    now = broker.now_ms()
    hosted = broker.replicas.get(topic, partition)
    if hosted is None:
        return _Done((ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{partition} is not hosted here"))
    limit = hosted.log.config.max_message_bytes
    if len(batch) > limit:
        return _Done(
            (ErrorCode.MESSAGE_TOO_LARGE, f"a batch of {len(batch)} bytes; the limit is {limit}")
        )
    data = bytearray(batch)
    result = hosted.append_as_leader(data, [(0, parse_header(data))], now, acks=-1)
    if result.error != ErrorCode.NONE:
        return _Done((result.error, result.message))
    # Followers waiting at this leader fetch the new records now.
    broker.partition_grew(topic, partition)
    operation = DelayedAppend(broker, (topic, partition), result.next_offset, now + timeout_ms)
    broker.produce_purgatory.try_complete_else_watch(operation, now)
    return operation
