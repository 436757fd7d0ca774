"""What a request handler may read and change: passed explicitly, never global."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.config.server import BrokerConfig
from broker.metrics.definitions import BrokerMetrics, NullMetrics
from broker.server.fetch_session import FetchSessionCache, ReplicaKey
from broker.server.metadata import MetadataCache
from broker.server.producer_ids import ProducerIdAllocator
from broker.server.replica_manager import ReplicaManager
from broker.util.purgatory import Purgatory

if TYPE_CHECKING:
    from broker.coordinator.coordinator import GroupCoordinator
    from broker.security.acl_store import AclStore
    from broker.security.authorizer import Authorizer
    from broker.security.credentials import Credentials
    from broker.server.dynamic_config import DynamicConfigs
    from broker.server.modes.membership import ClusterMembership
    from broker.server.modes.topic_admin import TopicAdmin
    from broker.server.replication_quota import ReplicationQuota
    from broker.transactions.manager import TransactionManager


_running: set[asyncio.Task] = set()


def _spawn_on_running_loop(coro: Coroutine) -> asyncio.Task:
    # The loop keeps only weak references to tasks: one nobody else holds can be
    # collected while it waits (a ZooKeeper answer), and its request never answered.
    task = asyncio.get_running_loop().create_task(coro)
    _running.add(task)
    task.add_done_callback(_running.discard)
    return task


@dataclass
class BrokerContext:
    config: BrokerConfig
    metadata: MetadataCache
    replicas: ReplicaManager
    producer_ids: ProducerIdAllocator
    now_ms: Callable[[], int]
    # Topic administration: the local controller of a single broker, ZooKeeper writes in
    # a cluster (broker/controller/).
    admin: TopicAdmin | None = None
    # This broker's part in a ZooKeeper cluster (None for a single broker).
    cluster: ClusterMembership | None = None
    # Runs work that needs I/O (ZooKeeper, other brokers) for a handler, on the loop.
    spawn: Callable[[Coroutine], Any] = _spawn_on_running_loop
    # Long-poll fetches waiting for data, and acks=all produces waiting for the ISR,
    # both keyed by (topic, partition).
    fetch_purgatory: Purgatory = field(default_factory=lambda: Purgatory("Fetch"))
    produce_purgatory: Purgatory = field(default_factory=lambda: Purgatory("Produce"))
    # Fetch sessions (KIP-227): what each fetcher already has (broker/server/fetch_session.py).
    fetch_sessions: FetchSessionCache | None = None
    # The group coordinator (broker/coordinator/), for the offsets partitions led here.
    groups: GroupCoordinator | None = None
    # The transaction coordinator (broker/transactions/), for the __transaction_state
    # partitions led here.
    transactions: TransactionManager | None = None
    # Topic overrides and dynamic broker configs in force (DescribeConfigs, AlterConfigs).
    configs: DynamicConfigs | None = None
    # What this broker, as a leader, sends to throttled followers (replication_quota.py).
    leader_quota: ReplicationQuota | None = None
    # ACL decisions (None: `authorizer.class.name` empty, no authorization) and where the
    # ACLs are kept (a file, or ZooKeeper in a cluster): broker/security/.
    authorizer: Authorizer | None = None
    acl_store: AclStore | None = None
    # The SCRAM credentials the SASL listeners check (broker/security/credentials.py).
    credentials: Credentials | None = None
    # Prometheus event metrics (broker/metrics/); NullMetrics when `metrics.port` is unset.
    metrics: BrokerMetrics = field(default_factory=NullMetrics)

    def __post_init__(self) -> None:
        if self.fetch_sessions is None:
            self.fetch_sessions = FetchSessionCache(
                self.config["max.incremental.fetch.session.cache.slots"],
                self.config["min.incremental.fetch.session.eviction.ms"],
            )
        self.replicas.high_watermark_listeners.append(self.partition_changed)
        self.replicas.leadership_listeners.append(self.partition_changed)
        self.replicas.leadership_listeners.append(self._leadership_metrics)
        # Read self.metrics at call time: open_broker_state may set it after construction.
        self.replicas.on_isr_proposed = lambda old, new: self.metrics.isr_proposed(old, new)
        self.replicas.logs.on_flush = lambda seconds: self.metrics.log_flushed(seconds)
        # A background flush returned: produces waiting for it (flush.messages) look.
        self.replicas.logs.on_durable = lambda tp: self.partition_changed(*tp)

    def _leadership_metrics(self, topic: str, partition: int) -> None:
        hosted = self.replicas.get(topic, partition)
        if hosted is not None:
            self.metrics.leadership_changed(topic, partition, hosted.leader_epoch, hosted.is_leader)

    def partition_changed(self, topic: str, partition: int) -> None:
        """The one place the broker hears that a partition's high watermark or leadership
        moved: every fetch waiting on it (consumers' and followers') and the acks=all
        produces waiting on it look at it."""
        now = self.now_ms()
        tp = (topic, partition)
        check = self.fetch_purgatory.check_and_complete
        for session in self.fetch_sessions.partition_changed(tp):
            check(session.key, now)
        check(tp, now)
        check(ReplicaKey(tp), now)
        self.produce_purgatory.check_and_complete(tp, now)

    def partition_grew(self, topic: str, partition: int) -> None:
        """An append as leader: the followers' fetches waiting on the partition look at it
        (their reads end at the log end). Not the consumers' fetches: they read below the
        high watermark, and an append that moves it calls `partition_changed` first, so
        checking them here read the partition for nothing once per acks=all record (issue
        23). Not the acks=all produces either, for the same reason (checking every parked
        produce at every append was a fifth of a leader's CPU at 5,000 unbatched acks=all
        records a second)."""
        now = self.now_ms()
        tp = (topic, partition)
        check = self.fetch_purgatory.check_and_complete
        for session in self.fetch_sessions.partition_grew(tp):
            check(session.key, now)
        check(ReplicaKey(tp), now)

    def purgatories(self) -> list[Purgatory]:
        """Every purgatory, for the timer that expires their operations."""
        own = [self.fetch_purgatory, self.produce_purgatory]
        return own + (self.groups.purgatories() if self.groups is not None else [])
