"""Kafka's "range" assignor: per topic, consecutive partition ranges to the members
subscribed to it, the first members one partition more when they do not divide evenly."""

from __future__ import annotations

from broker.client.group.assignors.base import Assignor, member_order
from broker.client.group.consumer_protocol import Subscription
from broker.cluster import TopicPartition


class RangeAssignor(Assignor):
    name = "range"

    def assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        order = member_order(subscriptions)
        for topic in sorted({t for s in subscriptions.values() for t in s.topics}):
            count = partitions_per_topic.get(topic, 0)
            members = [m for m in order if topic in subscriptions[m].topics]
            if not count or not members:
                continue
            per_member, extra = divmod(count, len(members))
            for i, member in enumerate(members):
                start = per_member * i + min(i, extra)
                length = per_member + (1 if i < extra else 0)
                out[member] += [TopicPartition(topic, p) for p in range(start, start + length)]
        return out
