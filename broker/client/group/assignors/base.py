"""What an assignor is: a name every client agrees on, and a function from the group's
subscriptions to each member's partitions, run by whichever member leads the group.

Every member of a group may become its leader, whatever client it runs, so an assignor
of a given name must compute what the other clients' assignors of that name accept, and
read their subscriptions' user data (the names and formats are Kafka's).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from broker.client.group.consumer_protocol import Assignment, Subscription
from broker.cluster import TopicPartition


class RebalanceProtocol(enum.IntEnum):
    """EAGER: every member gives up all its partitions before a rebalance (KIP-54 era).
    COOPERATIVE (KIP-429): members keep what they own; only partitions that move are
    revoked, and a second rebalance hands them to their new owners."""

    EAGER = 0
    COOPERATIVE = 1


class Assignor:
    """The interface; subclasses set `name` and implement `assign`."""

    name = ""
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        """The user data this member puts in its subscription (None: none)."""
        return None

    def assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        """member id -> its partitions. `partitions_per_topic` holds the partition count of
        every subscribed topic that exists; a topic missing from it gets no assignment."""
        raise NotImplementedError

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        """Called on every member with its assignment once a rebalance completes."""


def member_order(subscriptions: dict[str, Subscription]) -> list[str]:
    """Member ids in the order Kafka's range and round-robin assignors walk them: static
    members (by group.instance.id) first, then the others by member id."""

    def key(member_id: str) -> tuple:
        instance = subscriptions[member_id].group_instance_id
        return (0, instance, member_id) if instance else (1, member_id, "")

    return sorted(subscriptions, key=key)


def subscribed_partitions(
    partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
) -> list[TopicPartition]:
    """Every partition of every existing subscribed topic, by topic then partition."""
    topics = sorted(
        {t for s in subscriptions.values() for t in s.topics} & partitions_per_topic.keys()
    )
    return [TopicPartition(t, p) for t in topics for p in range(partitions_per_topic[t])]
