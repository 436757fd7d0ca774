"""Everything the controller reads from and writes to ZooKeeper, behind one small
interface, so its decisions can be tested against an in-memory store
(tests/controller/memory_store.py) as well as against a real ZooKeeper.

`ControllerStore` is the interface; `ZkControllerStore` is ZooKeeper's (Kafka 2.x paths
and JSON, broker/zk/layout.py; docs/contracts/cluster.md). Watches are
one-shot, as ZooKeeper's: `watch()` is called once on the event loop at the next change
of what was read, and the controller turns it into an event. Writes of decisions are
fenced by the version of /controller_epoch the controller wrote (a ZooKeeper multi): a
fence that no longer holds raises `Fenced`. A call cut short by a lost connection raises
ZooKeeper's `ConnectionLoss`: what it did is unknown and the watch it was setting is not
set, so the controller takes its place again once connected (`when_connected`).

Partition states are read and written many at a time: an event that changes a thousand
partitions costs a few requests, not a thousand round trips one after another. Writes go
as multis of many partitions, each multi fenced once (broker/zk/client.py
`commit_each`); reads are ZooKeeper multiReads of many znodes (`get_many`). `counts` tallies the requests
and operations, which the controller reports per event (broker/controller/events.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Protocol

from broker.cluster import BrokerRegistration, LeaderAndIsr, TopicPartition
from broker.zk import layout as z
from broker.zk.client import BadVersionError, NodeExistsError, NoNodeError, ZkClient, ZkCounts
from broker.zk.layout import Reassignment

log = logging.getLogger(__name__)

Watch = Callable[[], None]
Assignment = dict[int, list[int]]  # a topic's replicas per partition
Moves = dict[int, Reassignment]  # a topic's moves under way per partition


class Fenced(Exception):
    """Another controller has taken over: this one must stop acting."""


class ControllerStore(Protocol):
    counts: ZkCounts  # the requests made (and the operations they carried) so far

    def when_connected(self, callback: Callable[[], None]) -> None:
        """`callback()` on the event loop once connected (soon when connected now): what
        an event cut short by a lost connection waits for before it is taken up again."""

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

    async def read_states(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """The partitions' leaders and ISRs with their versions and the zxids of their
        last writes (missing or unreadable ones left out)."""

    async def read_topic_states(self, topic: str) -> dict[int, LeaderAndIsr]:
        """The states of every partition of the topic that has one."""

    async def take_isr_changes(self, watch: Watch) -> set[TopicPartition]:
        """The partitions named by ISR change notifications; the notifications go."""

    async def take_log_dir_events(self, watch: Watch) -> set[int]:
        """The brokers named by log dir failure notifications; the notifications go."""

    # -- decisions, fenced --------------------------------------------------------------
    async def create_states(
        self, states: dict[TopicPartition, LeaderAndIsr], fence: int
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """New partitions' states as stored (the one already there where created
        meanwhile; an unreadable one left out)."""

    async def write_states(
        self, states: dict[TopicPartition, LeaderAndIsr], fence: int
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """The states written, with their new versions; a partition whose state changed
        since its `zk_version` (a leader changed the ISR) is left out."""

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
        self.counts = ZkCounts()
        self.zk = zk.counted(self.counts)

    def when_connected(self, callback: Callable[[], None]) -> None:
        self.zk.when_connected(callback)

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
        children = await self.zk.get_children(z.BROKER_IDS, watch=_zk_watch(watch)) or []
        ids = [int(child) for child in children if child.isdigit()]
        live: dict[int, BrokerRegistration] = {}
        for broker_id, found in zip(
            ids, await self.zk.get_many(z.broker_path(i) for i in ids), strict=True
        ):
            if found is None:
                continue
            try:
                live[broker_id] = z.decode_broker(broker_id, found[0], found[1].czxid)
            except z.ZkDataError as exc:
                log.error("ignoring broker %d: %s", broker_id, exc)
        return live

    async def topic_names(self, watch: Watch) -> list[str]:
        return await self.zk.get_children(z.BROKER_TOPICS, watch=_zk_watch(watch)) or []

    async def read_topic(self, topic: str, watch: Watch) -> tuple[Assignment, Moves] | None:
        found = await self.zk.get(z.topic_path(topic), watch=_zk_watch(watch))
        if found is None:
            return None
        try:
            return z.decode_topic(topic, found[0])
        except z.ZkDataError as exc:
            log.error("ignoring topic %s: %s", topic, exc)
            return None

    async def read_topic_config(self, topic: str) -> dict[str, str]:
        config = await self.zk.get(z.topic_config_path(topic))
        return z.decode_topic_config(topic, config[0]) if config else {}

    async def read_states(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr]:
        partitions = list(partitions)
        found = await self.zk.get_many(z.partition_state_path(*tp) for tp in partitions)
        states = {}
        for tp, data in zip(partitions, found, strict=True):
            if data is None:
                continue
            try:
                state = z.decode_partition_state(data[0], data[1].version)
                states[tp] = replace(state, zxid=data[1].mzxid)
            except z.ZkDataError as exc:
                log.error("%s-%d: unreadable state: %s", *tp, exc)
        return states

    async def read_topic_states(self, topic: str) -> dict[int, LeaderAndIsr]:
        # Listing the partitions first spares a request per partition of a new topic
        # (none has a state yet) for one listing.
        children = await self.zk.get_children(z.partitions_path(topic)) or []
        states = await self.read_states([(topic, int(c)) for c in children if c.isdigit()])
        return {p: state for (_, p), state in states.items()}

    async def take_isr_changes(self, watch: Watch) -> set[TopicPartition]:
        children = sorted(
            await self.zk.get_children(z.ISR_CHANGE_NOTIFICATION, watch=_zk_watch(watch)) or []
        )
        paths = [f"{z.ISR_CHANGE_NOTIFICATION}/{child}" for child in children]
        changed: set[TopicPartition] = set()
        for path, found in zip(paths, await self.zk.get_many(paths), strict=True):
            if found is not None:
                try:
                    changed.update(z.decode_isr_change(found[0]))
                except z.ZkDataError as exc:
                    log.error("ignoring %s: %s", path, exc)
        # One gone already (deleted by an earlier controller) fails its own delete alone.
        await self.zk.commit_each([[("delete", path)] for path in paths])
        return changed

    async def take_log_dir_events(self, watch: Watch) -> set[int]:
        children = sorted(
            await self.zk.get_children(z.LOG_DIR_EVENT_NOTIFICATION, watch=_zk_watch(watch)) or []
        )
        paths = [f"{z.LOG_DIR_EVENT_NOTIFICATION}/{child}" for child in children]
        brokers: set[int] = set()
        for path, found in zip(paths, await self.zk.get_many(paths), strict=True):
            if found is not None:
                try:
                    brokers.add(z.decode_log_dir_event(found[0]))
                except z.ZkDataError as exc:
                    log.error("ignoring %s: %s", path, exc)
        await self.zk.commit_each([[("delete", path)] for path in paths])
        return brokers

    # -- decisions, fenced --------------------------------------------------------------
    async def create_states(
        self, states: dict[TopicPartition, LeaderAndIsr], fence: int
    ) -> dict[TopicPartition, LeaderAndIsr]:
        # Per topic, a listing of the partitions that already have a znode (the parent
        # created once if missing); then each partition's znode (where missing) and state.
        # One refused was created meanwhile (by a controller before us): take what is
        # there; a partition znode without a state gets its state on the second pass.
        stored: dict[TopicPartition, LeaderAndIsr] = {}
        pending = dict(states)
        for _ in range(2):
            groups: dict[TopicPartition, list[tuple]] = {}
            for topic in sorted({tp[0] for tp in pending}):
                parent = z.partitions_path(topic)
                existing = await self.zk.get_children(parent)
                if existing is None:  # a new topic
                    try:
                        await self.zk.create(parent, makepath=True)
                    except NodeExistsError:
                        pass
                existing = set(existing or ())
                for tp, state in pending.items():
                    if tp[0] == topic:
                        path = z.partition_state_path(*tp)
                        partition = path.rsplit("/", 1)[0]
                        znode = [] if str(tp[1]) in existing else [("create", partition, b"")]
                        groups[tp] = [*znode, ("create", path, z.encode_partition_state(state))]
            created, refused = await self._commit(groups, fence, "creating partition states")
            stored.update({tp: states[tp].with_version(0) for tp in created})
            found = await self.read_states(refused)
            stored.update(found)
            pending = {tp: states[tp] for tp in refused if tp not in found}
            if not pending:
                break
        return stored

    async def write_states(
        self, states: dict[TopicPartition, LeaderAndIsr], fence: int
    ) -> dict[TopicPartition, LeaderAndIsr]:
        groups = {
            tp: [
                (
                    "set",
                    z.partition_state_path(*tp),
                    z.encode_partition_state(state),
                    state.zk_version,
                )
            ]
            for tp, state in states.items()
        }
        written, _ = await self._commit(groups, fence, "writing partition states")
        return {tp: states[tp].with_version(result[-1].version) for tp, result in written.items()}

    async def _commit(
        self, groups: dict[TopicPartition, list[tuple]], fence: int, what: str
    ) -> tuple[dict[TopicPartition, list], list[TopicPartition]]:
        """Each partition's writes, fenced: those done (with their results) and those
        refused (BadVersion: changed meanwhile; NodeExists: created meanwhile; NoNode)."""
        partitions = list(groups)
        try:
            results = await self.zk.commit_each([groups[tp] for tp in partitions], [_fence(fence)])
        except (BadVersionError, NoNodeError) as exc:
            if getattr(exc, "failed_operation", None) == 0:
                raise Fenced(f"/controller_epoch moved on while {what}") from None
            raise
        done, refused = {}, []
        for tp, result in zip(partitions, results, strict=True):
            if not isinstance(result, Exception):
                done[tp] = result
            elif isinstance(result, (BadVersionError, NoNodeError, NodeExistsError)):
                refused.append(tp)
            else:
                raise result
        return done, refused

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
        # The partitions' znodes in multis (kazoo's recursive delete sends a request per
        # znode, one after another); anything left, e.g. a partition without a state,
        # goes with the recursive delete of the topic's znode.
        parent = z.partitions_path(topic)
        children = await self.zk.get_children(parent) or []
        await self.zk.commit_each(
            [[("delete", f"{parent}/{c}/state"), ("delete", f"{parent}/{c}")] for c in children]
        )
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
