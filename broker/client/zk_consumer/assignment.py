"""The seeds' partition assignment (Kafka 0.8's range assignor), as pure functions.

Per topic: sort its partitions (by number) and the consumer threads subscribed to it (by
name); with P partitions and C threads, thread i takes a contiguous range of P div C
partitions, and the first P mod C threads one more. Every member computes the same answer
from the same ZooKeeper state, so no one coordinates: each claims its own share.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def thread_ids(consumer_id: str, streams: int) -> list[str]:
    """A member's consumer threads as Kafka names them: `<consumer id>-<n>`; the owner
    znodes hold these names."""
    return [f"{consumer_id}-{n}" for n in range(streams)]


def range_assignment(partitions: Iterable[int], consumers: Iterable[str]) -> dict[str, list[int]]:
    """consumer -> its contiguous share of `partitions`; every consumer is a key (an empty
    list when there are more consumers than partitions)."""
    parts = sorted(set(partitions))
    members = sorted(set(consumers))
    if not members:
        return {}
    per_member, extra = divmod(len(parts), len(members))
    out: dict[str, list[int]] = {}
    for position, member in enumerate(members):
        start = per_member * position + min(position, extra)
        count = per_member + (1 if position < extra else 0)
        out[member] = parts[start : start + count]
    return out


def assign(
    topic_partitions: Mapping[str, Iterable[int]],
    subscriptions: Mapping[str, Mapping[str, int]],
) -> dict[str, list[tuple[str, int]]]:
    """The whole group's assignment: consumer thread -> [(topic, partition)], sorted.

    `topic_partitions`: the partitions each topic has (a topic missing here, not created
    yet, gets no owner); `subscriptions`: consumer id -> topic -> streams, as registered.
    """
    out: dict[str, list[tuple[str, int]]] = {}
    for consumer_id, subscription in subscriptions.items():
        for streams in subscription.values():
            for thread in thread_ids(consumer_id, streams):
                out.setdefault(thread, [])
    topics = sorted({t for s in subscriptions.values() for t in s})
    for topic in topics:
        threads = [
            thread
            for consumer_id, subscription in subscriptions.items()
            for thread in thread_ids(consumer_id, subscription.get(topic, 0))
        ]
        shares = range_assignment(topic_partitions.get(topic, ()), threads)
        for thread, parts in shares.items():
            out[thread] += [(topic, p) for p in parts]
    return {thread: sorted(parts) for thread, parts in out.items()}
