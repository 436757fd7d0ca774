"""What the controller reacts to, one at a time: named events, each with the state it
runs under (Kafka's ControllerState names), and the tallies the metrics read.

A ZooKeeper watch, a request handler, a broker's answer or a timer puts an event on the
controller's queue (broker/controller/controller.py); the controller's state is the
running event's while it is processed and `Idle` between events. The state is what logs
and `kafka_controller_state` show (broker/metrics/state.py); several events share one
state, as in Kafka (a topic's new partitions are a TopicChange like a new topic).

Events a request handler waits for carry `reply`, a future the controller resolves with
the event's result (or its exception).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

from broker.cluster import TopicPartition


class ControllerState(StrEnum):
    IDLE = "Idle"
    CONTROLLER_CHANGE = "ControllerChange"
    BROKER_CHANGE = "BrokerChange"
    TOPIC_CHANGE = "TopicChange"
    TOPIC_DELETION = "TopicDeletion"
    ALTER_PARTITION_REASSIGNMENT = "AlterPartitionReassignment"
    AUTO_LEADER_BALANCE = "AutoLeaderBalance"
    MANUAL_LEADER_BALANCE = "ManualLeaderBalance"
    CONTROLLED_SHUTDOWN = "ControlledShutdown"
    ISR_CHANGE = "IsrChange"
    LOG_DIR_CHANGE = "LogDirChange"


@dataclass(frozen=True)
class ControllerEvent:
    state: ClassVar[ControllerState]

    @property
    def name(self) -> str:
        return type(self).__name__


@dataclass(frozen=True, kw_only=True)
class Reply:
    """An event someone awaits: `reply` gets its result."""

    reply: asyncio.Future = field(compare=False, repr=False)


# -- who is the controller ------------------------------------------------------------------
@dataclass(frozen=True)
class Startup(ControllerEvent):
    """The broker started: run for controller."""

    state = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True)
class Reelect(ControllerEvent):
    """Run for controller again (fenced, or /controller went between a create and a read)."""

    state = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True)
class ControllerChange(ControllerEvent):
    """/controller changed (created, deleted): follow the new one or run."""

    state = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True)
class SessionRenewed(ControllerEvent):
    """A new ZooKeeper session: our /controller and every watch are gone."""

    state = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True)
class Reconnected(ControllerEvent):
    """The ZooKeeper connection is back after an event failed on its loss (the session
    lived): the watch that event was setting is not set and its work is half done, so
    the controller takes its place again from what ZooKeeper holds."""

    state = ControllerState.CONTROLLER_CHANGE


# -- brokers and topics ---------------------------------------------------------------------
@dataclass(frozen=True)
class BrokerChange(ControllerEvent):
    """/brokers/ids changed: brokers joined, died or re-registered."""

    state = ControllerState.BROKER_CHANGE


@dataclass(frozen=True)
class TopicChange(ControllerEvent):
    """/brokers/topics changed: topics created (or their znodes removed)."""

    state = ControllerState.TOPIC_CHANGE


@dataclass(frozen=True)
class PartitionModifications(ControllerEvent):
    """A topic's assignment znode changed: partitions were added (CreatePartitions)."""

    state = ControllerState.TOPIC_CHANGE
    topic: str


@dataclass(frozen=True)
class TopicDeletion(ControllerEvent):
    """/admin/delete_topics changed: topics marked for deletion."""

    state = ControllerState.TOPIC_DELETION


@dataclass(frozen=True)
class ReplicaDeleted(ControllerEvent):
    """A broker answered a deleting StopReplica for a topic being deleted."""

    state = ControllerState.TOPIC_DELETION
    topic: str
    broker_id: int


@dataclass(frozen=True)
class IsrChangeNotification(ControllerEvent):
    """Leaders wrote ISR changes and said so under /isr_change_notification."""

    state = ControllerState.ISR_CHANGE


@dataclass(frozen=True)
class LogDirEventNotification(ControllerEvent):
    """Brokers whose log dir failed said so under /log_dir_event_notification."""

    state = ControllerState.LOG_DIR_CHANGE


@dataclass(frozen=True)
class ReplicasOffline(ControllerEvent):
    """A broker answered KAFKA_STORAGE_ERROR for these replicas (their log dir failed)."""

    state = ControllerState.LOG_DIR_CHANGE
    broker_id: int
    partitions: frozenset[TopicPartition]


# -- asked for: shutdown, elections, reassignments --------------------------------------------
@dataclass(frozen=True, kw_only=True)
class ControlledShutdown(Reply, ControllerEvent):
    """ControlledShutdown: move a stopping broker's leaderships away."""

    state = ControllerState.CONTROLLED_SHUTDOWN
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, kw_only=True)
class LeaderElection(Reply, ControllerEvent):
    """ElectLeaders: the preferred replica, or (`unclean`) any live replica of a partition
    without a leader; `partitions` None: every partition."""

    state = ControllerState.MANUAL_LEADER_BALANCE
    partitions: list[TopicPartition] | None
    unclean: bool


@dataclass(frozen=True)
class PreferredReplicaElection(ControllerEvent):
    """/admin/preferred_replica_election was written (Kafka's tool)."""

    state = ControllerState.MANUAL_LEADER_BALANCE


@dataclass(frozen=True)
class AutoLeaderBalance(ControllerEvent):
    """auto.leader.rebalance.enable's periodic check."""

    state = ControllerState.AUTO_LEADER_BALANCE
    imbalance_percent: int


@dataclass(frozen=True, kw_only=True)
class PartitionReassignment(Reply, ControllerEvent):
    """AlterPartitionReassignments: targets per partition (None: cancel)."""

    state = ControllerState.ALTER_PARTITION_REASSIGNMENT
    asked: dict[TopicPartition, list[int] | None]


@dataclass(frozen=True)
class ZkPartitionReassignment(ControllerEvent):
    """/admin/reassign_partitions was written (Kafka's reassignment tool)."""

    state = ControllerState.ALTER_PARTITION_REASSIGNMENT


@dataclass
class EventTally:
    """Events of one type: how many ran, for how long, and the ZooKeeper requests they
    made and the operations those carried (a multi of N writes: one request, N
    operations) -- what keeps an event's ZooKeeper work bounded is asserted on these."""

    state: ControllerState
    count: int = 0
    seconds: float = 0.0
    zk_requests: int = 0
    zk_operations: int = 0


class ControllerStats:
    """The controller's state and, per event type, an EventTally (Kafka's
    ControllerStats, with the ZooKeeper work counted); read at scrape time by
    broker/metrics/state.py."""

    def __init__(self) -> None:
        self.state = ControllerState.IDLE
        self.events: dict[str, EventTally] = {}

    def ran(
        self, event: ControllerEvent, seconds: float, zk_requests: int = 0, zk_operations: int = 0
    ) -> None:
        tally = self.events.setdefault(event.name, EventTally(event.state))
        tally.count += 1
        tally.seconds += seconds
        tally.zk_requests += zk_requests
        tally.zk_operations += zk_operations

    def count(self, event_name: str) -> int:
        tally = self.events.get(event_name)
        return 0 if tally is None else tally.count
