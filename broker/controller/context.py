"""What the active controller knows of the cluster: the one object its decisions, and the
requests built from them (broker/controller/requests.py), are functions of.

Read from ZooKeeper when the broker becomes the controller, then changed only by events
(broker/controller/events.py), one at a time; gone when it resigns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.cluster import BrokerRegistration, LeaderAndIsr, TopicPartition
from broker.zk.layout import Reassignment


@dataclass
class ControllerContext:
    """The cluster as the controller of `epoch` sees it.

    A partition's phase beyond its leader and ISR is where it appears here: its topic in
    `deleting` (leaving every broker; no elections for it), its key in `reassigning`
    (its `assignments` entry is then the target followed by the leaving replicas), or a
    replica's broker in `shutting_down` (it leads nothing new, gets no LeaderAndIsr)."""

    controller_id: int
    # The inter-broker listener: the endpoint a broker is reached at (requests, leaders).
    listener: str
    epoch: int
    # The version of /controller_epoch this controller wrote: every state write checks it.
    epoch_zk_version: int
    live: dict[int, BrokerRegistration] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    assignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    states: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    # A topic's unclean.leader.election.enable override (None: the broker default).
    unclean: dict[str, bool | None] = field(default_factory=dict)
    deleting: set[str] = field(default_factory=set)
    # Replicas (topic, broker) of topics being deleted that have confirmed the deletion.
    deleted_replicas: set[tuple[str, int]] = field(default_factory=set)
    # Partitions being reassigned (their `assignments` entry is then every replica).
    reassigning: dict[TopicPartition, Reassignment] = field(default_factory=dict)
    # Replicas a live broker answered KAFKA_STORAGE_ERROR for (their log dir failed), by
    # broker, until it restarts: offline in UpdateMetadata as a dead broker's are.
    offline_dir_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)

    def replicas(self, tp: TopicPartition) -> list[int]:
        return self.assignments.get(tp[0], {}).get(tp[1], [])

    def partitions(self) -> list[TopicPartition]:
        return [(t, p) for t, parts in self.assignments.items() for p in parts]

    def partitions_on(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.partitions() if broker_id in self.replicas(tp)]

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self.live

    def offline_replicas(self, tp: TopicPartition) -> list[int]:
        """`tp`'s replicas on dead brokers or in failed log dirs (Kafka's offlineReplicas)."""
        return [
            r
            for r in self.replicas(tp)
            if r not in self.live or tp in self.offline_dir_replicas.get(r, ())
        ]

    def forget_topic(self, topic: str) -> None:
        """The topic is gone (deleted, or its znode removed): nothing of it is kept."""
        for partition in self.assignments.pop(topic, {}):
            self.states.pop((topic, partition), None)
        self.unclean.pop(topic, None)
        self.deleting.discard(topic)
        self.deleted_replicas = {r for r in self.deleted_replicas if r[0] != topic}
        self.reassigning = {tp: r for tp, r in self.reassigning.items() if tp[0] != topic}
