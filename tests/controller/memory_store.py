"""The controller without ZooKeeper or brokers: `MemoryStore` keeps what
`ZkControllerStore` keeps in znodes, behind the same interface
(broker/controller/store.py), with ZooKeeper's one-shot watches, and counts its calls as
the ZooKeeper store counts requests (`counts`: a call is one request, each znode read or
written one operation), so a test can bound an event's store work; `RecordingChannels`
records every request the controller sends and answers it with success.

Both call back through the event loop (as ZooKeeper's watches and the brokers' answers
do), so a test drives the controller by changing the store the way brokers and admin
tools change ZooKeeper, lets the loop settle (tests/helpers/aio.py), and reads what was
written and sent. Nothing waits on a clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable
from dataclasses import replace

from broker.cluster import BrokerRegistration, Endpoint, LeaderAndIsr, TopicPartition
from broker.controller.events import ControllerState
from broker.controller.store import Fenced, Watch
from broker.protocol.apis import LEADER_AND_ISR_API, STOP_REPLICA_API, UPDATE_METADATA_API
from broker.zk.client import ConnectionLoss, ZkCounts
from broker.zk.layout import Reassignment


class MemoryStore:
    def __init__(self) -> None:
        self.controller: int | None = None
        self.epoch: int | None = None
        self.epoch_version = -1
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, tuple[dict[int, list[int]], dict[int, Reassignment]]] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.states: dict[TopicPartition, LeaderAndIsr] = {}
        self.isr_notifications: list[list[TopicPartition]] = []
        self.log_dir_events: list[int] = []
        self.marked_for_deletion: list[str] = []
        self.preferred_election: list[TopicPartition] | None = None
        self.reassign_request: dict[TopicPartition, list[int]] | None = None
        # Every write, in order: (what, which).
        self.writes: list[tuple] = []
        self._watches: dict[str, list[Watch]] = {}
        # ZooKeeper's zxid: every registration (its czxid is the broker's epoch) and every
        # partition state write (the state's zxid) takes the next one.
        self.zxid = 100
        self.counts = ZkCounts()
        # Every call of the store's interface, in order: (method, znodes it covered).
        self.calls: list[tuple[str, int]] = []
        # The connection (`disconnect`, `reconnect`): calls named in `cut` fail once with
        # ConnectionLoss before acting, those in `cut_after` once after acting (the
        # answer lost), as a request in flight when ZooKeeper goes.
        self.connected = True
        self.cut: set[str] = set()
        self.cut_after: set[str] = set()
        self._on_connected: list = []

    # The interface's calls that take many partitions: one call, an operation each.
    BATCHES = frozenset({"read_states", "create_states", "write_states"})

    def __getattribute__(self, name: str):
        # Every call of the store's interface (its public coroutine functions) counted.
        attribute = object.__getattribute__(self, name)
        if name.startswith("_") or not asyncio.iscoroutinefunction(attribute):
            return attribute

        async def counted(*args, **kwargs):
            operations = len(args[0]) if name in MemoryStore.BATCHES else 1
            self.counts.add(operations)
            self.calls.append((name, operations))
            if name in self.cut:
                self.cut.discard(name)
                raise ConnectionLoss()
            result = await attribute(*args, **kwargs)
            if name in self.cut_after:
                self.cut_after.discard(name)
                raise ConnectionLoss()
            return result

        return counted

    def _next_zxid(self) -> int:
        self.zxid += 1
        return self.zxid

    # -- watches --------------------------------------------------------------------------
    def _watch(self, key: str, watch: Watch | None) -> None:
        if watch is not None:
            self._watches.setdefault(key, []).append(watch)

    def _fire(self, key: str) -> None:
        loop = asyncio.get_running_loop()
        for watch in self._watches.pop(key, []):
            loop.call_soon(watch)

    # -- the connection -------------------------------------------------------------------
    def when_connected(self, callback) -> None:
        if self.connected:
            asyncio.get_running_loop().call_soon(callback)
        else:
            self._on_connected.append(callback)

    def disconnect(self) -> None:
        """The connection drops, the session lives: as kazoo, every watch set fires (and
        is gone)."""
        self.connected = False
        for key in list(self._watches):
            self._fire(key)

    def reconnect(self) -> None:
        self.connected = True
        loop = asyncio.get_running_loop()
        for callback in self._on_connected:
            loop.call_soon(callback)
        self._on_connected.clear()

    # -- /controller and /controller_epoch ----------------------------------------------
    async def create_controller(self, broker_id: int, timestamp_ms: int) -> bool:
        if self.controller is not None:
            return False
        self.controller = broker_id
        self.writes.append(("controller", broker_id))
        self._fire("controller")
        return True

    async def read_controller(self, watch: Watch | None = None) -> int | None:
        if self.controller is not None:
            self._watch("controller", watch)
        return self.controller

    async def watch_controller(self, watch: Watch) -> None:
        self._watch("controller", watch)

    async def resign_controller(self, broker_id: int) -> None:
        if self.controller == broker_id:
            self._controller_gone()

    def _controller_gone(self) -> None:
        self.controller = None
        self.writes.append(("controller", None))
        self._fire("controller")

    async def increment_epoch(self) -> tuple[int, int]:
        self.epoch = (self.epoch or 0) + 1
        self.epoch_version += 1
        self.writes.append(("controller_epoch", self.epoch))
        return self.epoch, self.epoch_version

    async def ensure_paths(self) -> None:
        pass

    # -- reading the cluster ------------------------------------------------------------
    async def read_brokers(self, watch: Watch) -> dict[int, BrokerRegistration]:
        self._watch("brokers", watch)
        return dict(self.brokers)

    async def topic_names(self, watch: Watch) -> list[str]:
        self._watch("topics", watch)
        return list(self.topics)

    async def read_topic(self, topic: str, watch: Watch):
        if topic not in self.topics:
            return None
        self._watch(f"topic {topic}", watch)
        assignment, moving = self.topics[topic]
        return {p: list(r) for p, r in assignment.items()}, dict(moving)

    async def read_topic_config(self, topic: str) -> dict[str, str]:
        return dict(self.configs.get(topic, {}))

    async def read_states(self, partitions) -> dict[TopicPartition, LeaderAndIsr]:
        return {tp: self.states[tp] for tp in partitions if tp in self.states}

    async def read_topic_states(self, topic: str) -> dict[int, LeaderAndIsr]:
        return {p: state for (t, p), state in self.states.items() if t == topic}

    async def take_isr_changes(self, watch: Watch) -> set[TopicPartition]:
        self._watch("isr", watch)
        taken, self.isr_notifications = self.isr_notifications, []
        if taken:
            self._fire("isr")  # deleting the notifications is a change of the children
        return {tp for notification in taken for tp in notification}

    async def take_log_dir_events(self, watch: Watch) -> set[int]:
        self._watch("log_dir", watch)
        taken, self.log_dir_events = self.log_dir_events, []
        if taken:
            self._fire("log_dir")
        return set(taken)

    # -- decisions, fenced --------------------------------------------------------------
    def _check(self, fence: int, what: str) -> None:
        if fence != self.epoch_version:
            raise Fenced(f"/controller_epoch moved on while writing {what}")

    async def create_states(self, states, fence: int) -> dict[TopicPartition, LeaderAndIsr]:
        self._check(fence, "partition states")
        for tp, state in states.items():
            if tp not in self.states:
                self.states[tp] = replace(state.with_version(0), zxid=self._next_zxid())
                self.writes.append(("create state", tp))
        return {tp: self.states[tp] for tp in states}

    async def write_states(self, states, fence: int) -> dict[TopicPartition, LeaderAndIsr]:
        self._check(fence, "partition states")
        written = {}
        for tp, state in states.items():
            stored = self.states.get(tp)
            if stored is not None and stored.zk_version == state.zk_version:
                stored = replace(state.with_version(stored.zk_version + 1), zxid=self._next_zxid())
                written[tp] = self.states[tp] = stored
                self.writes.append(("state", tp))
        return written

    async def write_assignment(self, topic, assignment, moving, fence: int) -> None:
        self._check(fence, topic)
        self.topics[topic] = ({p: list(r) for p, r in assignment.items()}, dict(moving))
        self.writes.append(("assignment", topic))
        self._fire(f"topic {topic}")

    # -- topic deletion -----------------------------------------------------------------
    async def topics_to_delete(self, watch: Watch) -> list[str]:
        self._watch("deletions", watch)
        return list(self.marked_for_deletion)

    async def unmark_deletion(self, topic: str) -> None:
        if topic in self.marked_for_deletion:
            self.marked_for_deletion.remove(topic)
            self.writes.append(("unmark deletion", topic))
            self._fire("deletions")

    async def delete_topic(self, topic: str) -> None:
        assignment, _ = self.topics.pop(topic, ({}, {}))
        for partition in assignment:
            self.states.pop((topic, partition), None)
        self.configs.pop(topic, None)
        self.writes.append(("delete topic", topic))
        self._fire(f"topic {topic}")
        self._fire("topics")
        await self.unmark_deletion(topic)

    # -- requests written by admin tools ------------------------------------------------
    async def read_preferred_election(self, watch: Watch) -> list[TopicPartition] | None:
        self._watch("preferred", watch)
        return self.preferred_election

    async def delete_preferred_election(self) -> None:
        if self.preferred_election is not None:
            self.preferred_election = None
            self.writes.append(("delete preferred election", None))
            self._fire("preferred")

    async def read_reassign_request(self, watch: Watch):
        self._watch("reassign", watch)
        return None if self.reassign_request is None else dict(self.reassign_request)

    async def keep_reassign_requests(self, under_way: Collection[TopicPartition]) -> None:
        if self.reassign_request is None:
            return
        remaining = {tp: r for tp, r in self.reassign_request.items() if tp in under_way}
        if remaining == self.reassign_request:
            return
        self.reassign_request = remaining or None
        self.writes.append(("reassign request", remaining))
        self._fire("reassign")

    # -- what brokers and admin tools do ------------------------------------------------
    def register(self, broker_id: int) -> BrokerRegistration:
        """A broker (re)registers, with a new broker epoch."""
        self.brokers[broker_id] = BrokerRegistration(
            broker_id,
            (Endpoint("PLAINTEXT", f"broker{broker_id}", 9092, "PLAINTEXT"),),
            None,
            0,
            epoch=self._next_zxid(),
        )
        self._fire("brokers")
        return self.brokers[broker_id]

    def session_ended(self, broker_id: int) -> None:
        """A broker's ZooKeeper session ends: its registration and /controller go."""
        if self.brokers.pop(broker_id, None) is not None:
            self._fire("brokers")
        if self.controller == broker_id:
            self._controller_gone()

    def create_topic(self, topic: str, assignment: dict[int, list[int]], config=None) -> None:
        self.configs[topic] = dict(config or {})
        self.topics[topic] = (assignment, {})
        self._fire("topics")

    def add_partitions(self, topic: str, added: dict[int, list[int]]) -> None:
        assignment, moving = self.topics[topic]
        self.topics[topic] = ({**assignment, **added}, moving)
        self._fire(f"topic {topic}")

    def mark_for_deletion(self, topic: str) -> None:
        self.marked_for_deletion.append(topic)
        self._fire("deletions")

    def leader_writes_isr(self, tp: TopicPartition, isr: tuple[int, ...]) -> None:
        """The leader changes the ISR (a conditional write) and notifies the controller."""
        state = self.states[tp]
        self.states[tp] = LeaderAndIsr(
            state.leader,
            state.leader_epoch,
            isr,
            state.controller_epoch,
            state.zk_version + 1,
            self._next_zxid(),
        )
        self.isr_notifications.append([tp])
        self._fire("isr")

    def request_preferred_election(self, partitions: list[TopicPartition]) -> None:
        self.preferred_election = list(partitions)
        self._fire("preferred")

    def request_reassignment(self, targets: dict[TopicPartition, list[int]]) -> None:
        self.reassign_request = dict(targets)
        self._fire("reassign")

    def another_controller_took_over(self) -> None:
        """/controller_epoch moved on behind this controller's back."""
        self.epoch = (self.epoch or 0) + 5
        self.epoch_version += 1


class RecordingChannels:
    """The controller's channels to brokers, recording each request (with the state the
    controller was in when it sent it) and answering it with success on the loop."""

    API_NAMES = {
        LEADER_AND_ISR_API.key: "LeaderAndIsr",
        UPDATE_METADATA_API.key: "UpdateMetadata",
        STOP_REPLICA_API.key: "StopReplica",
    }

    def __init__(self) -> None:
        self.open_to: set[int] = set()
        # (broker id, API name, body, the controller's state then)
        self.sent: list[tuple[int, str, dict, ControllerState | None]] = []
        self.controller = None  # set by the test: its state is recorded with each request
        self.unanswered: set[int] = set()  # brokers that never answer

    def __contains__(self, broker_id: int) -> bool:
        return broker_id in self.open_to

    def open(self, registration: BrokerRegistration) -> None:
        self.open_to.add(registration.broker_id)

    async def close(self, broker_id: int) -> None:
        self.open_to.discard(broker_id)

    async def close_all(self) -> None:
        self.open_to.clear()

    def send(self, broker_id: int, api, body: dict, on_response=None) -> None:
        if broker_id not in self.open_to:
            return
        state = self.controller.state if self.controller is not None else None
        self.sent.append((broker_id, self.API_NAMES[api.key], body, state))
        if on_response is not None and broker_id not in self.unanswered:
            response = {"error_code": 0, "partition_errors": []}
            asyncio.get_running_loop().call_soon(on_response, response)

    def to(self, broker_id: int, api: str) -> list[dict]:
        return [body for b, name, body, _ in self.sent if b == broker_id and name == api]

    def partition_states(self, broker_id: int, api: str) -> Iterable[tuple[str, dict]]:
        for body in self.to(broker_id, api):
            for topic in body["topic_states"]:
                for p in topic["partition_states"]:
                    yield topic["topic_name"], p
