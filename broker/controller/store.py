"""Everything the controller reads from and writes to ZooKeeper, behind one small
interface, so its decisions can be tested against an in-memory store
(tests/controller/memory_store.py) as well as against a real ZooKeeper.

`ControllerStore` is the interface; `ZkControllerStore` is ZooKeeper's (Kafka 2.x paths
and JSON, broker/zk/layout.py; docs/contracts/cluster.md). Watches are
one-shot, as ZooKeeper's: `watch()` is called once on the event loop at the next change
of what was read, and the controller turns it into an event. Writes of decisions are
fenced by the version of /controller_epoch the controller wrote (a ZooKeeper multi): a
fence that no longer holds raises `Fenced`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Protocol

from broker.cluster import BrokerRegistration, LeaderAndIsr, TopicPartition
from broker.zk import layout as z
from broker.zk.client import BadVersionError, NodeExistsError, NoNodeError, ZkClient
from broker.zk.layout import Reassignment

log = logging.getLogger(__name__)

Watch = Callable[[], None]
Assignment = dict[int, list[int]]  # a topic's replicas per partition
Moves = dict[int, Reassignment]  # a topic's moves under way per partition


class Fenced(Exception):
    """Another controller has taken over: this one must stop acting."""


class ControllerStore(Protocol):
    # -- /controller and /controller_epoch ----------------------------------------------
    async def create_controller(self, broker_id: int, timestamp_ms: int) -> bool:
        """Claim /controller (ephemeral); False when someone holds it."""

    async def read_controller(self, watch: Watch | None = None) -> int | None:
        """The active controller's id; None when there is none (the watch then fires on
        a new one only through `watch_controller`)."""

    async def watch_controller(self, watch: Watch) -> None:
        """A watch on /controller, existing or not."""

    async def resign_controller(self, broker_id: int) -> None:
        """Delete /controller if it is ours."""

    async def increment_epoch(self) -> tuple[int, int]:
        """/controller_epoch + 1: the new epoch and the version that fences our writes.
        Raises Fenced when another controller incremented it first."""

    async def ensure_paths(self) -> None:
        """The persistent paths the controller watches exist."""

    # -- reading the cluster ------------------------------------------------------------
    async def read_brokers(self, watch: Watch) -> dict[int, BrokerRegistration]:
        """The registered brokers (unreadable registrations skipped)."""

    async def topic_names(self, watch: Watch) -> list[str]:
        """The topics in /brokers/topics."""

    async def read_topic(self, topic: str, watch: Watch) -> tuple[Assignment, Moves] | None:
        """A topic's assignment and its moves under way; None when gone or unreadable."""

    async def read_topic_config(self, topic: str) -> dict[str, str]:
        """The topic's config overrides ({} when none)."""

    async def read_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        """The partition's leader and ISR with its version; None when missing/unreadable."""

    async def take_isr_changes(self, watch: Watch) -> set[TopicPartition]:
        """The partitions named by ISR change notifications; the notifications go."""

    # -- decisions, fenced --------------------------------------------------------------
    async def create_state(
        self, tp: TopicPartition, state: LeaderAndIsr, fence: int
    ) -> LeaderAndIsr | None:
        """A new partition's state as stored (the one already there if created meanwhile)."""

    async def write_state(
        self, tp: TopicPartition, state: LeaderAndIsr, fence: int
    ) -> LeaderAndIsr | None:
        """The stored state, or None when it changed since `state.zk_version`."""

    async def write_assignment(
        self, topic: str, assignment: Assignment, moving: Moves, fence: int
    ) -> None:
        """The topic's replicas and its moves under way."""

    # -- topic deletion -----------------------------------------------------------------
    async def topics_to_delete(self, watch: Watch) -> list[str]:
        """The topics marked for deletion."""

    async def unmark_deletion(self, topic: str) -> None:
        """Remove the topic's deletion mark."""

    async def delete_topic(self, topic: str) -> None:
        """The topic's znodes (assignment and states, config, deletion mark), in order."""

    # -- requests written by admin tools ------------------------------------------------
    async def read_preferred_election(self, watch: Watch) -> list[TopicPartition] | None:
        """/admin/preferred_replica_election's partitions (None: no request); the watch
        fires when it is written."""

    async def delete_preferred_election(self) -> None: ...

    async def read_reassign_request(self, watch: Watch) -> dict[TopicPartition, list[int]] | None:
        """/admin/reassign_partitions' targets (None: no request); the watch fires when it
        is written."""

    async def keep_reassign_requests(self, under_way: Collection[TopicPartition]) -> None:
        """Keep in /admin/reassign_partitions only the moves of `under_way` (none: delete)."""


class ZkControllerStore:
    """The controller's reads and writes as ZooKeeper calls."""

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    # -- /controller and /controller_epoch ----------------------------------------------
    async def create_controller(self, broker_id: int, timestamp_ms: int) -> bool:
        try:
            await self.zk.create(
                z.CONTROLLER, z.encode_controller(broker_id, timestamp_ms), ephemeral=True
            )
        except NodeExistsError:
            return False
        return True

    async def read_controller(self, watch: Watch | None = None) -> int | None:
        data = await self.zk.get(z.CONTROLLER, watch=_zk_watch(watch))
        return None if data is None else z.decode_controller(data[0])

    async def watch_controller(self, watch: Watch) -> None:
        await self.zk.exists(z.CONTROLLER, watch=_zk_watch(watch))

    async def resign_controller(self, broker_id: int) -> None:
        data = await self.zk.get(z.CONTROLLER)
        if data is not None and z.decode_controller(data[0]) == broker_id:
            await self.zk.delete(z.CONTROLLER, version=data[1].version)

    async def increment_epoch(self) -> tuple[int, int]:
        while True:
            found = await self.zk.get(z.CONTROLLER_EPOCH)
            if found is None:
                try:
                    await self.zk.create(z.CONTROLLER_EPOCH, z.encode_controller_epoch(1))
                    return 1, 0
                except NodeExistsError:
                    continue
            epoch = z.decode_controller_epoch(found[0]) + 1
            try:
                stat = await self.zk.set(
                    z.CONTROLLER_EPOCH, z.encode_controller_epoch(epoch), found[1].version
                )
                return epoch, stat.version
            except BadVersionError:
                raise Fenced("another controller incremented the epoch first") from None

    async def ensure_paths(self) -> None:
        await self.zk.ensure_paths(z.PERSISTENT_PATHS)

    # -- reading the cluster ------------------------------------------------------------
    async def read_brokers(self, watch: Watch) -> dict[int, BrokerRegistration]:
        ids = await self.zk.get_children(z.BROKER_IDS, watch=_zk_watch(watch)) or []
        live: dict[int, BrokerRegistration] = {}
        for child in ids:
            if not child.isdigit():
                continue
            found = await self.zk.get(z.broker_path(int(child)))
            if found is None:
                continue
            try:
                live[int(child)] = z.decode_broker(int(child), found[0], found[1].czxid)
            except z.ZkDataError as exc:
                log.error("ignoring broker %s: %s", child, exc)
        return live

    async def topic_names(self, watch: Watch) -> list[str]:
        return await self.zk.get_children(z.BROKER_TOPICS, watch=_zk_watch(watch)) or []

    async def read_topic(self, topic: str, watch: Watch) -> tuple[Assignment, Moves] | None:
        found = await self.zk.get(z.topic_path(topic), watch=_zk_watch(watch))
        if found is None:
            return None
        try:
            return z.decode_assignment(topic, found[0]), z.decode_reassignments(topic, found[0])
        except z.ZkDataError as exc:
            log.error("ignoring topic %s: %s", topic, exc)
            return None

    async def read_topic_config(self, topic: str) -> dict[str, str]:
        config = await self.zk.get(z.topic_config_path(topic))
        return z.decode_topic_config(topic, config[0]) if config else {}

    async def read_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        found = await self.zk.get(z.partition_state_path(*tp))
        if found is None:
            return None
        try:
            return z.decode_partition_state(found[0], found[1].version)
        except z.ZkDataError as exc:
            log.error("%s-%d: unreadable state: %s", *tp, exc)
            return None

    async def take_isr_changes(self, watch: Watch) -> set[TopicPartition]:
        children = (
            await self.zk.get_children(z.ISR_CHANGE_NOTIFICATION, watch=_zk_watch(watch)) or []
        )
        changed: set[TopicPartition] = set()
        for child in sorted(children):
            path = f"{z.ISR_CHANGE_NOTIFICATION}/{child}"
            found = await self.zk.get(path)
            if found is not None:
                try:
                    changed.update(z.decode_isr_change(found[0]))
                except z.ZkDataError as exc:
                    log.error("ignoring %s: %s", path, exc)
            await self.zk.delete(path)
        return changed

    # -- decisions, fenced --------------------------------------------------------------
    async def create_state(
        self, tp: TopicPartition, state: LeaderAndIsr, fence: int
    ) -> LeaderAndIsr | None:
        path = z.partition_state_path(*tp)
        await self.zk.ensure_paths([path.rsplit("/", 1)[0]])
        try:
            await self.zk.commit([_fence(fence), ("create", path, z.encode_partition_state(state))])
            return state.with_version(0)
        except (BadVersionError, NoNodeError, NodeExistsError) as exc:
            if getattr(exc, "failed_operation", None) == 0:
                raise Fenced(f"/controller_epoch moved on while creating {path}") from None
            return await self.read_state(tp)  # created meanwhile: take what is there

    async def write_state(
        self, tp: TopicPartition, state: LeaderAndIsr, fence: int
    ) -> LeaderAndIsr | None:
        path = z.partition_state_path(*tp)
        data = z.encode_partition_state(state)
        try:
            results = await self.zk.commit([_fence(fence), ("set", path, data, state.zk_version)])
        except (BadVersionError, NoNodeError) as exc:
            if getattr(exc, "failed_operation", None) == 0:
                raise Fenced(f"/controller_epoch moved on while writing {path}") from None
            return None
        return state.with_version(results[1].version)

    async def write_assignment(
        self, topic: str, assignment: Assignment, moving: Moves, fence: int
    ) -> None:
        data = z.encode_assignment(assignment, moving)
        try:
            await self.zk.commit([_fence(fence), ("set", z.topic_path(topic), data, -1)])
        except (BadVersionError, NoNodeError) as exc:
            if getattr(exc, "failed_operation", None) == 0:
                raise Fenced(f"/controller_epoch moved on while writing {topic}") from None
            raise

    # -- topic deletion -----------------------------------------------------------------
    async def topics_to_delete(self, watch: Watch) -> list[str]:
        return await self.zk.get_children(z.DELETE_TOPICS, watch=_zk_watch(watch)) or []

    async def unmark_deletion(self, topic: str) -> None:
        await self.zk.delete(z.delete_topic_path(topic))

    async def delete_topic(self, topic: str) -> None:
        await self.zk.delete(z.topic_path(topic), recursive=True)
        await self.zk.delete(z.topic_config_path(topic))
        await self.zk.delete(z.delete_topic_path(topic))

    # -- requests written by admin tools ------------------------------------------------
    async def read_preferred_election(self, watch: Watch) -> list[TopicPartition] | None:
        found = await self.zk.get(z.PREFERRED_REPLICA_ELECTION)
        await self.zk.exists(z.PREFERRED_REPLICA_ELECTION, watch=_zk_watch(watch))
        if found is None:
            return None
        try:
            return z.decode_partition_list(found[0], "preferred replica election")
        except z.ZkDataError as exc:
            log.error("ignoring %s: %s", z.PREFERRED_REPLICA_ELECTION, exc)
            return []

    async def delete_preferred_election(self) -> None:
        await self.zk.delete(z.PREFERRED_REPLICA_ELECTION)

    async def read_reassign_request(self, watch: Watch) -> dict[TopicPartition, list[int]] | None:
        found = await self.zk.get(z.REASSIGN_PARTITIONS)
        await self.zk.exists(z.REASSIGN_PARTITIONS, watch=_zk_watch(watch))
        if found is None:
            return None
        try:
            return z.decode_reassign_request(found[0])
        except z.ZkDataError as exc:
            log.error("ignoring %s: %s", z.REASSIGN_PARTITIONS, exc)
            return {}

    async def keep_reassign_requests(self, under_way: Collection[TopicPartition]) -> None:
        found = await self.zk.get(z.REASSIGN_PARTITIONS)
        if found is None:
            return
        try:
            asked = z.decode_reassign_request(found[0])
        except z.ZkDataError:
            asked = {}
        remaining = {tp: r for tp, r in asked.items() if tp in under_way}
        if not remaining:
            await self.zk.delete(z.REASSIGN_PARTITIONS)
        elif remaining != asked:
            await self.zk.set(z.REASSIGN_PARTITIONS, z.encode_reassign_request(remaining))


def _fence(version: int) -> tuple:
    return ("check", z.CONTROLLER_EPOCH, version)


def _zk_watch(watch: Watch | None):
    return None if watch is None else (lambda event: watch())
