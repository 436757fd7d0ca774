"""MetadataCache: the one place the metadata the broker serves comes from.

In single-broker mode the broker itself fills it from its logs; in cluster mode the
controller's updates (from ZooKeeper) will. Handlers only read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass
class MetadataCache:
    cluster_id: str
    controller_id: int = -1
    brokers: dict[int, BrokerEndpoint] = field(default_factory=dict)
    topics: dict[str, dict[int, PartitionState]] = field(default_factory=dict)
    internal_topics: frozenset[str] = frozenset({"__consumer_offsets", "__transaction_state"})

    def set_broker(self, endpoint: BrokerEndpoint) -> None:
        self.brokers[endpoint.node_id] = endpoint

    def set_partition(self, state: PartitionState) -> None:
        self.topics.setdefault(state.topic, {})[state.partition] = state

    def remove_topic(self, topic: str) -> None:
        self.topics.pop(topic, None)

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        return self.topics.get(topic, {}).get(partition)

    def partition_count(self, topic: str) -> int:
        return len(self.topics.get(topic, ()))
