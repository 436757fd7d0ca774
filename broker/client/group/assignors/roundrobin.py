"""Kafka's "roundrobin" assignor: every partition of every subscribed topic (by topic,
then partition) dealt to the members in turn, skipping members not subscribed to it."""

from __future__ import annotations

from broker.client.group.assignors.base import Assignor, member_order, subscribed_partitions
from broker.client.group.consumer_protocol import Subscription
from broker.cluster import TopicPartition


class RoundRobinAssignor(Assignor):
    name = "roundrobin"

    def assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        order = member_order(subscriptions)
        turn = 0
        for tp in subscribed_partitions(partitions_per_topic, subscriptions):
            # Some member is subscribed to every listed topic, so this ends.
            while tp.topic not in subscriptions[order[turn]].topics:
                turn = (turn + 1) % len(order)
            out[order[turn]].append(tp)
            turn = (turn + 1) % len(order)
        return out
