"""Errors of the group consumer beyond the broker's error codes (broker.protocol.errors)."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode, KafkaError


class CommitFailedError(KafkaError):
    """A commit the group refused because this member is no longer in it (its generation
    is stale, it was removed, or a rebalance is under way): the partitions may already be
    someone else's. `.code` is the coordinator's answer (ILLEGAL_GENERATION,
    UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID)."""

    def __init__(self, code: int, detail: str):
        super().__init__(
            f"commit failed, the group has rebalanced or is rebalancing: {detail}", code
        )


class NoOffsetForPartitionError(KafkaError):
    """auto.offset.reset=none and a partition has no committed offset (or it is out of range)."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(self, partitions):
        self.partitions = sorted(partitions)
        names = ", ".join(f"{t}-{p}" for t, p in self.partitions)
        super().__init__(f"no committed offset and auto.offset.reset=none for {names}")
