"""What the consumer consumes: the subscription (topics or a pattern) or a manual
assignment, the partitions assigned, and each one's position; plus the rebalance
listener the application gave."""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable

from broker.cluster import TopicPartition

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class RebalanceListener:
    """Kafka's ConsumerRebalanceListener. Called on the thread that calls poll() (or
    close()), with sets of TopicPartition:

    - on_partitions_revoked: the member gives these up and still owns them while the
      callback runs (commit their offsets here); eager protocols revoke everything
      before every rebalance, cooperative ones only what moves to another member;
    - on_partitions_assigned: newly assigned (cooperative: only the added ones; called
      after every rebalance, possibly with an empty set);
    - on_partitions_lost: the member was removed from the group (session timeout, poll
      timeout, fenced generation): the partitions may already be someone else's, so
      committing is pointless. By default this calls on_partitions_revoked, as Kafka's.
    """

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        pass

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self.on_partitions_revoked(partitions)


class Mode(enum.Enum):
    NONE = "none"
    TOPICS = "topics"  # subscribe(topics)
    PATTERN = "pattern"  # subscribe(pattern=...)
    MANUAL = "manual"  # assign(partitions)


class PartitionState:
    """position: the next offset to consume; None until initialised from the committed
    offset, or, when `reset` names "earliest" or "latest", from that end of the log
    (seek_to_beginning/end, an out-of-range position). leader_epoch: of the last consumed
    record, committed along with the position (KIP-320)."""

    __slots__ = ("position", "leader_epoch", "reset")

    def __init__(self) -> None:
        self.position: int | None = None
        self.leader_epoch = -1
        self.reset: str | None = None


class SubscriptionState:
    def __init__(self, exclude_internal_topics: bool = True):
        self.exclude_internal_topics = exclude_internal_topics
        self.mode = Mode.NONE
        self.topics: set[str] = set()  # subscribed (for a pattern: the topics it matches now)
        self.pattern: re.Pattern | None = None
        self.listener = RebalanceListener()
        self.assignment: dict[TopicPartition, PartitionState] = {}

    def _switch(self, mode: Mode) -> None:
        if self.mode not in (Mode.NONE, mode):
            raise ValueError(
                f"the consumer is in {self.mode.value} mode: unsubscribe() before switching "
                f"to {mode.value} (subscribe() and assign() do not mix)"
            )
        self.mode = mode

    def subscribe(self, topics: Iterable[str], listener: RebalanceListener | None) -> bool:
        """Returns whether the subscribed topics changed."""
        topics = set(topics)
        if not topics or any(not isinstance(t, str) or not t.strip() for t in topics):
            raise ValueError(f"subscribe() needs topic names, not {sorted(map(repr, topics))}")
        self._switch(Mode.TOPICS)
        self.pattern = None
        self.listener = listener or RebalanceListener()
        changed, self.topics = topics != self.topics, topics
        return changed

    def subscribe_pattern(self, pattern: str | re.Pattern, listener) -> None:
        self._switch(Mode.PATTERN)
        self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        self.listener = listener or RebalanceListener()

    def matching(self, topics: Iterable[str]) -> set[str]:
        """The topics the pattern matches (whole names, as Java's matches())."""
        assert self.pattern is not None
        return {
            t
            for t in topics
            if self.pattern.fullmatch(t)
            and not (self.exclude_internal_topics and t in INTERNAL_TOPICS)
        }

    def assign_manually(self, partitions: Iterable[TopicPartition]) -> None:
        self._switch(Mode.MANUAL)
        partitions = [TopicPartition(*tp) for tp in partitions]
        self.topics = {tp.topic for tp in partitions}
        self.set_assignment(partitions)

    def unsubscribe(self) -> None:
        self.mode = Mode.NONE
        self.topics = set()
        self.pattern = None
        self.listener = RebalanceListener()
        self.assignment = {}

    @property
    def subscribed(self) -> bool:
        return self.mode in (Mode.TOPICS, Mode.PATTERN)

    def set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        """The new assignment; partitions kept keep their positions."""
        self.assignment = {
            tp: self.assignment.get(tp) or PartitionState() for tp in sorted(set(partitions))
        }

    def state(self, tp: TopicPartition) -> PartitionState:
        state = self.assignment.get(tp)
        if state is None:
            raise ValueError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        return state
