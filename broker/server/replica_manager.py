"""The partitions hosted here, and what the broker does when the controller decides.

The replica manager does not decide anything about topics or leaders: it reacts to
leadership decisions (LeaderAndIsr from the controller, or the local controller of a
single broker): make leader, make follower, stop replica (and delete). Followers are
handed to the replica fetchers; ISR changes a leader wants are handed to an ISR writer
(ZooKeeper in a cluster) and applied when written. Topic administration lives in
broker/controller/ (docs/contracts/cluster.md).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from broker.cluster import TopicPartition
from broker.log.log import KafkaStorageError
from broker.log.manager import LogManager
from broker.protocol.errors import ErrorCode
from broker.server.partition import Leadership, Partition
from broker.server.topic_config import TopicConfigs

log = logging.getLogger(__name__)


# How long a broker with no log dir left keeps answering (KAFKA_STORAGE_ERROR) before it
# exits: long enough for the answers already decided, among them the one to the request
# whose write failed, to reach their clients (Kafka halts from a thread of its own, so
# its request threads answer meanwhile too).
HALT_DELAY_S = 0.5


def _halt() -> None:
    """Stop, as Kafka halts: nothing is left to serve, and the controller moves the
    leaderships once our ZooKeeper session ends (docs/contracts/log.md, "Log directory
    failure"). No clean shutdown: it would flush and checkpoint what failed."""

    def exit_now() -> None:
        logging.shutdown()
        os._exit(1)

    try:
        asyncio.get_running_loop().call_later(HALT_DELAY_S, exit_now)
    except RuntimeError:  # no event loop (tools): at once
        exit_now()


class Fetchers(Protocol):
    """The replica fetchers (broker/server/replica_fetcher.py), as the manager uses them."""

    # Partitions failed on data they could not take, each with its error, until `add`
    # (a new leadership) tries them again; the metrics count them.
    failed: dict[TopicPartition, str]

    def add(self, tp: TopicPartition, leader: int, address: tuple[str, int]) -> None: ...

    def remove(self, tp: TopicPartition) -> None: ...


class IsrWriter(Protocol):
    """Writes a leader's ISR change where the controller reads it (ZooKeeper)."""

    def write(self, partition: Partition, isr: tuple[int, ...]) -> None: ...


@dataclass(frozen=True)
class PartitionDecision:
    """One partition of a LeaderAndIsr request."""

    topic: str
    partition: int
    state: Leadership
    is_new: bool = False


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        logs: LogManager,
        topic_configs: TopicConfigs,
        now_ms: Callable[[], int],
        retain_batches: int = 5,
    ) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self.topic_configs = topic_configs
        self.now_ms = now_ms
        self.retain_batches = retain_batches
        self.partitions: dict[TopicPartition, Partition] = {}
        # By follower id, the partitions led here whose ISR lacks it (`_isr_set`).
        self.out_of_sync: dict[int, set[TopicPartition]] = {}
        self.high_watermark_listeners: list[Callable[[str, int], None]] = []
        # Told (topic, partition) when a partition's leadership changes: requests waiting
        # on it (acks=all) answer NOT_LEADER_OR_FOLLOWER instead of waiting in vain.
        self.leadership_listeners: list[Callable[[str, int], None]] = []
        self.fetchers: Fetchers | None = None
        self.isr_writer: IsrWriter | None = None
        # Told (current ISR, proposed ISR) of each change proposed as leader (metrics).
        self.on_isr_proposed: Callable[[tuple[int, ...], tuple[int, ...]], None] = lambda old, new: (
            None
        )
        # The newest controller epoch seen: requests from older controllers are refused.
        self.controller_epoch = -1
        # Told each log dir that went offline, after its partitions stopped (the broker:
        # tell the controller, or stop when no log dir is left).
        self.on_dir_failed: Callable[[Path], None] = lambda path: None
        logs.on_dir_failed = self._dir_failed
        # Called when no log dir is left (tests replace it).
        self.halt: Callable[[], None] = _halt

    # -- start-up -------------------------------------------------------------------
    def load(self) -> None:
        """Open (and recover) the logs on disk, each with its topic's config, and host a
        partition for each. None is led or followed until the controller decides."""
        self.logs.load(self.topic_configs.log_configs())
        hws = self.logs.high_watermarks()
        for each in self.logs.logs():
            self._host(
                Partition(
                    each,
                    self.broker_id,
                    high_watermark=hws.get((each.topic, each.partition)),
                    retain_batches=self.retain_batches,
                )
            )

    def _host(self, partition: Partition) -> Partition:
        partition.on_high_watermark = self._high_watermark_moved
        partition.on_isr = self._isr_set
        self.partitions[(partition.topic, partition.index)] = partition
        return partition

    def _isr_set(self, partition: Partition) -> None:
        """Keep `out_of_sync` (partitions led here whose ISR lacks a follower, by
        follower): a follower fetching through a session names a partition only when its
        offset moves, so its fetches count these ones from the offset the session holds
        (handlers/fetch.py); nothing else lets a caught-up follower back in while nothing
        is appended, e.g. after a new leader epoch reset what the leader knew of it."""
        tp = (partition.topic, partition.index)
        for replica in partition.replicas:
            if replica == self.broker_id:
                continue
            lagging = partition.is_leader and replica not in partition.isr
            if lagging:
                self.out_of_sync.setdefault(replica, set()).add(tp)
            elif tp in self.out_of_sync.get(replica, ()):
                self.out_of_sync[replica].discard(tp)

    def _high_watermark_moved(self, topic: str, partition: int) -> None:
        for listener in self.high_watermark_listeners:
            listener(topic, partition)

    def _leadership_changed(self, topic: str, partition: int) -> None:
        for listener in self.leadership_listeners:
            listener(topic, partition)

    def _dir_failed(self, log_dir: Path) -> None:
        """A log dir went offline (LogManager.dir_failed): its partitions are neither
        fetched nor served from now on (they answer KAFKA_STORAGE_ERROR); requests
        waiting on them answer now. Kafka's ReplicaManager.handleLogDirFailure."""
        offline = [tp for tp, p in self.partitions.items() if p.log.offline]
        for tp in offline:
            if self.fetchers is not None:
                self.fetchers.remove(tp)
            self._leadership_changed(*tp)
        log.warning(
            "stopped %d partitions of offline log dir %s: %s",
            len(offline),
            log_dir,
            ", ".join(f"{t}-{p}" for t, p in sorted(offline)[:20]),
        )
        self.on_dir_failed(log_dir)
        if self.logs.all_dirs_offline:
            log.error(
                "Shutdown broker because all log dirs in %s have failed",
                ", ".join(str(d) for d in self.logs.log_dirs),
            )
            self.halt()

    # -- leadership decisions ---------------------------------------------------------
    def apply_leadership(
        self,
        decisions: list[PartitionDecision],
        leaders: dict[int, tuple[str, int]],
    ) -> dict[TopicPartition, ErrorCode]:
        """Make this broker leader or follower of each partition, as decided. A decision
        whose leader epoch is older than the one the partition has is ignored
        (STALE_CONTROLLER_EPOCH, as Kafka answers); `leaders` gives the followers the
        address of their leader. Returns the error per partition."""
        now = self.now_ms()
        errors: dict[TopicPartition, ErrorCode] = {}
        for decision in decisions:
            tp = (decision.topic, decision.partition)
            state = decision.state
            if self.broker_id not in state.replicas:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            partition = self.partitions.get(tp)
            if partition is not None and partition.log.offline:
                # Kafka's answer: the controller learns the replica is offline.
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if partition is None:
                try:
                    partition = self._create(decision.topic, decision.partition)
                except KafkaStorageError:
                    errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                    continue
            elif state.leader_epoch < partition.leader_epoch or (
                state.leader_epoch == partition.leader_epoch
                and (
                    state.zk_version < partition.zk_version
                    or (
                        partition.leader_id == state.leader
                        and partition.isr == state.isr
                        and partition.replicas == state.replicas
                    )
                )
            ):
                # Same or older: a re-sent or stale decision changes nothing. At the same
                # epoch, a state older than the one this broker last took or wrote (its
                # znode version is lower) is stale too: a controller taking over sends
                # every state as it read them, and a leader that shrank its ISR meanwhile
                # must keep its own (taken, the dropped follower was back "in sync" here
                # while ZooKeeper said otherwise, and never rejoined: docs/faults.md,
                # F12). A broker that just started knows no leader yet (version -1), so
                # it takes an equal epoch.
                errors[tp] = (
                    ErrorCode.STALE_CONTROLLER_EPOCH
                    if state.leader_epoch < partition.leader_epoch
                    else ErrorCode.NONE
                )
                continue
            if state.leader == self.broker_id:
                if self.fetchers is not None:
                    self.fetchers.remove(tp)
                partition.make_leader(state, now)
            else:
                partition.make_follower(state)
                address = leaders.get(state.leader)
                if self.fetchers is not None:
                    if address is None or state.leader < 0:
                        self.fetchers.remove(tp)  # no leader alive: nothing to follow yet
                    else:
                        self.fetchers.add(tp, state.leader, address)
            errors[tp] = ErrorCode.NONE
            self._leadership_changed(*tp)
        return errors

    def _create(self, topic: str, index: int) -> Partition:
        created = self.logs.create(topic, index, self.topic_configs.log_config(topic))
        return self._host(Partition(created, self.broker_id, retain_batches=self.retain_batches))

    def stop_replicas(self, partitions: list[TopicPartition], delete: bool) -> None:
        """Stop replicating (and serving) these partitions; with `delete`, remove them."""
        for tp in partitions:
            if self.fetchers is not None:
                self.fetchers.remove(tp)
            partition = self.partitions.get(tp)
            if partition is None:
                continue
            if delete:
                del self.partitions[tp]
                for lagging in self.out_of_sync.values():
                    lagging.discard(tp)
                self.logs.delete_partition(*tp)
            else:
                partition.make_follower(
                    Leadership(-1, partition.leader_epoch, partition.isr, partition.replicas)
                )
            self._leadership_changed(*tp)

    # -- the ISR (leaders) --------------------------------------------------------------
    def follower_fetched(
        self, partition: Partition, replica_id: int, fetch_offset: int, session=None
    ) -> None:
        """A follower's fetch (through fetch `session`, if any): its log end moves, the
        high watermark may, the ISR may grow."""
        partition.record_follower_fetch(replica_id, fetch_offset, self.now_ms(), session)
        grown = partition.isr_expansion()
        if grown is not None:
            self._change_isr(partition, grown)

    def shrink_isrs(self, max_lag_ms: int) -> None:
        """Drop followers that have not caught up for `max_lag_ms` from the ISRs we lead."""
        now = self.now_ms()
        for partition in self.partitions.values():
            shrunk = partition.isr_shrink(now, max_lag_ms)
            if shrunk is not None:
                self._change_isr(partition, shrunk)

    def _change_isr(self, partition: Partition, isr: tuple[int, ...]) -> None:
        if self.isr_writer is None:  # a single broker has no followers to add or drop
            return
        log.info(
            "%s-%d: ISR %s -> %s", partition.topic, partition.index, list(partition.isr), list(isr)
        )
        self.on_isr_proposed(partition.isr, isr)
        partition.propose_isr(isr)
        self.isr_writer.write(partition, isr)

    # -- reads ----------------------------------------------------------------------
    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {key: p.high_watermark for key, p in self.partitions.items()}
