"""MetadataCache: the one place the metadata the broker serves comes from.

Metadata flows one way: the controller decides and every broker's cache is told, by an
UpdateMetadata request in a cluster, by the local controller of a single broker; both go
through `update()`. Handlers only read it. A partition's own leadership (what this broker
does with its replica) is the replica manager's business, learnt from LeaderAndIsr; the
new leader and epoch it names also move the cache ahead (`take_leaderships`), so a broker
that has just stopped leading never names itself as leader to a client it refuses.

It also keeps each topic's Metadata entry as encoded for the last answer, per (version,
listener): a client (and the benchmarks) polls Metadata for thousands of partitions that
change only at a leadership change, and encoding them through the generic codec was a
quarter of a broker's CPU in a 10,000-partition failover (issue 23). `update` drops the
entries of the topics it touches, and all of them when the live brokers change (the
leader a client is told depends on which brokers are live and reachable).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field, replace

from broker.cluster import LEADER_DURING_DELETE, BrokerRegistration


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    controller_epoch: int = 0
    zk_version: int = 0


@dataclass
class MetadataCache:
    cluster_id: str
    controller_id: int = -1
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    topics: dict[str, dict[int, PartitionState]] = field(default_factory=dict)
    internal_topics: frozenset[str] = frozenset({"__consumer_offsets", "__transaction_state"})
    # The newest controller epoch that updated the cache: older controllers are refused.
    controller_epoch: int = -1
    # Told the topics an update touched (created, changed, deleted), so requests waiting
    # for a topic to appear or go (CreateTopics, DeleteTopics) can complete.
    listeners: list[Callable[[set[str]], None]] = field(default_factory=list)
    # topic -> (api version, listener) -> its encoded Metadata entry (`encoded_topic`).
    _encoded: dict[str, dict[Hashable, bytes]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    # Metadata entries encoded (tests bound it: once per topic and change, not per request).
    topic_encodings: int = field(default=0, init=False, compare=False)

    def update(
        self,
        controller_id: int,
        controller_epoch: int,
        brokers: Iterable[BrokerRegistration] | None,
        partitions: Iterable[PartitionState],
    ) -> set[str]:
        """Apply an UpdateMetadata: `brokers` (when given) replaces the live brokers; each
        partition state replaces the cached one, and one whose leader is
        LEADER_DURING_DELETE removes its partition (and the topic with its last one).
        Returns the topics touched."""
        self.controller_id = controller_id
        self.controller_epoch = max(self.controller_epoch, controller_epoch)
        if brokers is not None:
            live = {b.broker_id: b for b in brokers}
            if live != self.brokers:
                self._encoded.clear()
            self.brokers = live
        touched: set[str] = set()
        for state in partitions:
            if state.topic not in touched:
                touched.add(state.topic)
                self._encoded.pop(state.topic, None)
            if state.leader == LEADER_DURING_DELETE:
                topic = self.topics.get(state.topic)
                if topic is not None:
                    topic.pop(state.partition, None)
                    if not topic:
                        del self.topics[state.topic]
            else:
                self.topics.setdefault(state.topic, {})[state.partition] = state
        if touched:
            for listener in self.listeners:
                listener(touched)
        return touched

    def take_leaderships(self, states: Iterable[PartitionState]) -> set[str]:
        """Partition states from a LeaderAndIsr, for the partitions the cache holds at an
        older leader epoch (offline replicas kept as cached). The controller sends the
        UpdateMetadata only after the LeaderAndIsr (to a broker shutting down, after a
        StopReplica too), while a broker that stops leading refuses produce requests at
        once (NOT_LEADER_OR_FOLLOWER): a client asking it for metadata in between would
        be told the old leader again, and librdkafka then waits for its next one-second
        scan before asking again. Returns the topics touched."""
        newer = []
        for state in states:
            cached = self.partition(state.topic, state.partition)
            if cached is not None and state.leader_epoch > cached.leader_epoch:
                newer.append(replace(state, offline_replicas=cached.offline_replicas))
        if not newer:
            return set()
        return self.update(self.controller_id, self.controller_epoch, None, newer)

    def encoded_topic(self, topic: str, key: Hashable, encode: Callable[[], bytes]) -> bytes:
        """The topic's Metadata entry encoded for `key` (api version and listener):
        `encode()` when nothing touched the topic or the live brokers since it was last
        encoded for that key, the bytes kept from then otherwise."""
        entries = self._encoded.setdefault(topic, {})
        found = entries.get(key)
        if found is None:
            found = entries[key] = encode()
            self.topic_encodings += 1
        return found

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        return self.topics.get(topic, {}).get(partition)

    def partition_count(self, topic: str) -> int:
        return len(self.topics.get(topic, ()))

    def is_online(self, state: PartitionState) -> bool:
        """Whether the partition's leader is a live broker."""
        return state.leader >= 0 and state.leader in self.brokers

    def has_leaders(self, topic: str) -> bool:
        """Whether the topic exists and every partition has a live leader."""
        partitions = self.topics.get(topic)
        return bool(partitions) and all(self.is_online(p) for p in partitions.values())
