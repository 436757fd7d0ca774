"""The cluster's controller: the one broker that decides leaders and tells the others.

Whoever creates the ephemeral `/controller` znode is the controller; it increments
`/controller_epoch` and fences every state write it makes with a check on that znode's
version (a ZooKeeper multi), so a controller that lost its place cannot overwrite its
successor's decisions, and brokers refuse requests carrying an older epoch. It watches
the broker registrations, the topics, topic deletions and the leaders' ISR change
notifications, and reacts one event at a time (an asyncio queue; watches arrive through
broker/zk/client.py on the loop):

- a broker joins: it gets the metadata and the leadership of its replicas; offline
  partitions it can lead are elected;
- a broker dies (its session ends): partitions it led get a new leader from the ISR
  (broker/controller/election.py; offline when none may lead), it leaves the ISRs it
  was in;
- a broker shuts down cleanly (ControlledShutdown): its leaderships move first;
- a topic appears: its partitions are initialised (first live replica leads);
- a topic is marked for deletion: it leaves the metadata, its replicas are stopped and
  deleted, then its znodes;
- a leader changed an ISR: the new state goes to every broker's metadata;
- leaders are asked for (ElectLeaders, `/admin/preferred_replica_election`, or the
  automatic rebalance of `auto.leader.rebalance.enable`): the preferred replica, when in
  sync, takes its leadership back;
- partitions are reassigned (AlterPartitionReassignments, `/admin/reassign_partitions`):
  new replicas are added, and once they are in sync leadership moves into the target and
  the leaving replicas are stopped and deleted (broker/controller/reassignment.py).

Requests to brokers go through one ordered, retried channel per broker
(broker/inter_broker/). The layout of what it reads and writes is
docs/contracts/cluster.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from broker.cluster import (
    LEADER_DURING_DELETE,
    SECURITY_PROTOCOL_IDS,
    BrokerRegistration,
    LeaderAndIsr,
    NotController,
    TopicPartition,
)
from broker.controller import election, reassignment
from broker.inter_broker import NodeClient, RequestChannel
from broker.inter_broker.security import PLAINTEXT, InterBrokerSecurity
from broker.protocol.apis import (
    LEADER_AND_ISR_API,
    STOP_REPLICA_API,
    UPDATE_METADATA_API,
)
from broker.protocol.errors import ErrorCode
from broker.util.clock import now_ms
from broker.zk import layout as z
from broker.zk.client import BadVersionError, NodeExistsError, NoNodeError, ZkClient
from broker.zk.layout import Reassignment

log = logging.getLogger(__name__)

UNCLEAN_KEY = "unclean.leader.election.enable"


class Fenced(Exception):
    """Another controller has taken over: this one must stop acting."""


@dataclass(frozen=True)
class AutoRebalance:
    """auto.leader.rebalance.enable and its settings: every `interval_s`, a broker leading
    fewer than (100 - `imbalance_percent`)% of the partitions it is the preferred leader
    of gets them back (where it is in sync)."""

    imbalance_percent: int = 10
    interval_s: float = 300.0


@dataclass
class ControllerContext:
    epoch: int
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

    def replicas(self, tp: TopicPartition) -> list[int]:
        return self.assignments.get(tp[0], {}).get(tp[1], [])

    def partitions(self) -> list[TopicPartition]:
        return [(t, p) for t, parts in self.assignments.items() for p in parts]

    def partitions_on(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.partitions() if broker_id in self.replicas(tp)]

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self.live


class Controller:
    def __init__(
        self,
        broker_id: int,
        zk: ZkClient,
        *,
        listener: str,
        unclean_default: bool | Callable[[], bool],
        request_timeout_s: float,
        on_change: Callable[[int | None], None] = lambda controller_id: None,
        auto_rebalance: AutoRebalance | None = None,
        security: InterBrokerSecurity = PLAINTEXT,
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.listener = listener  # the inter-broker listener: where requests are sent
        self.security = security  # and how (its TLS and SASL)
        self.unclean_default = unclean_default
        self.request_timeout_s = request_timeout_s
        self.on_change = on_change  # told the active controller's id (or None)
        self.ctx: ControllerContext | None = None
        self.active_controller: int | None = None
        self._events: asyncio.Queue[Callable[[], Awaitable[None]]] = asyncio.Queue()
        self._runner: asyncio.Task | None = None
        self._channels: dict[int, RequestChannel] = {}
        self._stopped = False
        self.auto_rebalance = auto_rebalance
        self._rebalance_timer: asyncio.Task | None = None

    @property
    def is_active(self) -> bool:
        return self.ctx is not None

    # -- election -----------------------------------------------------------------------
    def start(self) -> None:
        self._stopped = False
        self._runner = asyncio.get_running_loop().create_task(self._run(), name="controller")
        self.enqueue(self._elect)

    async def stop(self) -> None:
        """Stop acting and resign (our /controller goes with the session or is deleted)."""
        self._stopped = True
        if self.is_active:
            await self._abdicate()
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
            self._runner = None

    def enqueue(self, event: Callable[[], Awaitable[None]]) -> None:
        if not self._stopped:
            self._events.put_nowait(event)

    def session_renewed(self) -> None:
        """A new ZooKeeper session: our /controller (if any) and every watch are gone."""
        self.enqueue(self._resign_and_elect)

    async def _run(self) -> None:
        while True:
            event = await self._events.get()
            try:
                await event()
            except Fenced as exc:
                log.warning("controller %d fenced: %s", self.broker_id, exc)
                await self._abdicate()
                self.enqueue(self._elect)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller event failed")

    async def _elect(self) -> None:
        if self._stopped or self.is_active:
            return
        try:
            await self.zk.create(
                z.CONTROLLER, z.encode_controller(self.broker_id, now_ms()), ephemeral=True
            )
        except NodeExistsError:
            data = await self.zk.get(z.CONTROLLER, watch=self._controller_watch)
            if data is None:  # gone between the create and the read: try again
                self.enqueue(self._elect)
                return
            self._set_active(z.decode_controller(data[0]))
            return
        self._set_active(self.broker_id)
        await self.zk.exists(z.CONTROLLER, watch=self._controller_watch)
        await self._activate()

    def _controller_watch(self, event) -> None:
        self.enqueue(self._controller_changed)

    async def _controller_changed(self) -> None:
        data = await self.zk.get(z.CONTROLLER, watch=self._controller_watch)
        if data is None:
            await self._resign()
            await self._elect()
            return
        active = z.decode_controller(data[0])
        if active != self.broker_id and self.is_active:
            await self._resign()
        self._set_active(active)

    async def _abdicate(self) -> None:
        """Resign and delete our /controller, so that an election happens at once (a
        fenced controller whose session lives would otherwise block everyone)."""
        await self._resign()
        try:
            data = await self.zk.get(z.CONTROLLER)
            if data is not None and z.decode_controller(data[0]) == self.broker_id:
                await self.zk.delete(z.CONTROLLER, version=data[1].version)
        except Exception:  # the session may be gone already: the node went with it
            log.debug("could not delete /controller", exc_info=True)

    async def _resign_and_elect(self) -> None:
        await self._resign()
        await self._elect()

    def _set_active(self, controller_id: int | None) -> None:
        if controller_id != self.active_controller:
            log.info("active controller: %s", controller_id)
        self.active_controller = controller_id
        self.on_change(controller_id)

    async def _resign(self) -> None:
        if self.ctx is None:
            return
        log.info("broker %d resigns as controller (epoch %d)", self.broker_id, self.ctx.epoch)
        self.ctx = None
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()
            channel.node.close()

    # -- becoming the controller --------------------------------------------------------
    async def _activate(self) -> None:
        epoch, version = await self._increment_epoch()
        self.ctx = ControllerContext(epoch, version)
        log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
        await self.zk.ensure_paths(z.PERSISTENT_PATHS)
        await self._read_brokers()
        await self._read_topics()
        log.info(
            "live brokers %s, %d topics, %d partitions",
            sorted(self.ctx.live),
            len(self.ctx.assignments),
            len(self.ctx.states),
        )
        for broker_id in self.ctx.live:
            self._open_channel(broker_id)
        # Every broker gets the whole picture, and each live replica its leadership.
        self._send_update_metadata(self.ctx.partitions())
        for broker_id in self.ctx.live:
            self._send_leader_and_isr(self.ctx.partitions_on(broker_id), only={broker_id})
        # Brokers that died while nobody was controller: their leaderships and ISR places.
        gone = {r for st in self.ctx.states.values() for r in (st.leader, *st.isr)}
        gone -= set(self.ctx.live) | {-1}
        if gone:
            await self._replicas_offline(gone)
        await self._elect_offline(self.ctx.partitions())
        await self._deletions_changed()
        await self._isr_changes()
        await self._preferred_election_requested()
        await self._reassign_requested()
        await self._finish_moves(sorted(self.ctx.reassigning))  # caught up meanwhile
        if self.auto_rebalance is not None:
            self._rebalance_timer = asyncio.get_running_loop().create_task(
                self._rebalance_periodically(self.auto_rebalance), name="leader-rebalance"
            )

    async def _increment_epoch(self) -> tuple[int, int]:
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

    # -- reading the cluster ----------------------------------------------------------
    async def _read_brokers(self) -> dict[int, BrokerRegistration]:
        ids = await self.zk.get_children(z.BROKER_IDS, watch=self._brokers_watch) or []
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
        if self.ctx is not None and not self.ctx.live:
            self.ctx.live = live
        return live

    async def _read_topics(self) -> None:
        topics = await self.zk.get_children(z.BROKER_TOPICS, watch=self._topics_watch) or []
        for topic in topics:
            await self._read_topic(topic)

    async def _read_topic(self, topic: str) -> dict[int, list[int]] | None:
        found = await self.zk.get(z.topic_path(topic), watch=self._topic_watch(topic))
        if found is None:
            return None
        try:
            assignment = z.decode_assignment(topic, found[0])
            moving = z.decode_reassignments(topic, found[0])
        except z.ZkDataError as exc:
            log.error("ignoring topic %s: %s", topic, exc)
            return None
        self.ctx.assignments[topic] = assignment
        self.ctx.reassigning = {tp: r for tp, r in self.ctx.reassigning.items() if tp[0] != topic}
        self.ctx.reassigning.update({(topic, p): r for p, r in moving.items()})
        config = await self.zk.get(z.topic_config_path(topic))
        overrides = z.decode_topic_config(topic, config[0]) if config else {}
        self._take_unclean(topic, overrides)
        for partition in assignment:
            state = await self._read_state((topic, partition))
            if state is not None:
                self.ctx.states[(topic, partition)] = state
        return assignment

    def _take_unclean(self, topic: str, overrides: dict[str, str]) -> None:
        value = overrides.get(UNCLEAN_KEY)
        self.ctx.unclean[topic] = None if value is None else value.strip().lower() == "true"

    async def _refresh_unclean(self, topics: Iterable[str]) -> None:
        """Read again whether these topics allow unclean elections: their configs change at
        run time (AlterConfigs), and an election about to happen must follow the change."""
        for topic in sorted(set(topics)):
            config = await self.zk.get(z.topic_config_path(topic))
            self._take_unclean(topic, z.decode_topic_config(topic, config[0]) if config else {})

    def _allows_unclean(self, topic: str) -> bool:
        override = self.ctx.unclean.get(topic)
        if override is not None:
            return override
        default = self.unclean_default
        return default() if callable(default) else default

    async def _read_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        found = await self.zk.get(z.partition_state_path(*tp))
        if found is None:
            return None
        try:
            return z.decode_partition_state(found[0], found[1].version)
        except z.ZkDataError as exc:
            log.error("%s-%d: unreadable state: %s", *tp, exc)
            return None

    # -- watches: each enqueues an event ---------------------------------------------------
    def _brokers_watch(self, event) -> None:
        self.enqueue(self._brokers_changed)

    def _topics_watch(self, event) -> None:
        self.enqueue(self._topics_changed)

    def _topic_watch(self, topic: str):
        def watch(event) -> None:
            self.enqueue(lambda: self._topic_changed(topic))

        return watch

    def _deletions_watch(self, event) -> None:
        self.enqueue(self._deletions_changed)

    def _isr_watch(self, event) -> None:
        self.enqueue(self._isr_changes)

    def _preferred_election_watch(self, event) -> None:
        self.enqueue(self._preferred_election_requested)

    def _reassign_watch(self, event) -> None:
        self.enqueue(self._reassign_requested)

    # -- brokers coming and going -----------------------------------------------------
    async def _brokers_changed(self) -> None:
        if self.ctx is None:
            return
        now_live = await self._read_brokers()
        before = self.ctx.live
        # A broker that restarted before its old session ended has a new registration
        # (a new epoch): it died and came back.
        bounced = {b for b in now_live if b in before and now_live[b].epoch != before[b].epoch}
        dead = (set(before) - set(now_live)) | bounced
        new = (set(now_live) - set(before)) | bounced
        if dead:
            await self._on_brokers_failed(dead)
        self.ctx.live = now_live
        for broker_id in now_live:
            if broker_id in new or broker_id not in self._channels:
                self._open_channel(broker_id)
        if new:
            await self._on_brokers_started(new)

    async def _on_brokers_started(self, new: set[int]) -> None:
        ctx = self.ctx
        log.info("brokers started: %s", sorted(new))
        ctx.shutting_down -= new
        self._send_update_metadata(ctx.partitions())
        for broker_id in new:
            mine = [tp for tp in ctx.partitions_on(broker_id) if tp[0] not in ctx.deleting]
            self._send_leader_and_isr(mine, only={broker_id})
        await self._elect_offline(ctx.partitions())
        self._resume_deletions(new)

    async def _on_brokers_failed(self, dead: set[int]) -> None:
        ctx = self.ctx
        log.info("brokers failed: %s", sorted(dead))
        for broker_id in dead:
            ctx.live.pop(broker_id, None)
            ctx.shutting_down.discard(broker_id)
            channel = self._channels.pop(broker_id, None)
            if channel is not None:
                await channel.close()
                channel.node.close()
        await self._replicas_offline(dead)

    async def _replicas_offline(self, dead: set[int]) -> None:
        """Partitions led by `dead` brokers get new leaders; they leave every ISR."""
        ctx = self.ctx

        def decide(tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr | None:
            if state.leader in dead:
                return self._elect_one(tp, state)
            if dead & set(state.isr):
                return election.without_replicas(state, dead, ctx.epoch)
            return None

        affected = [tp for tp in ctx.states if tp[0] not in ctx.deleting]
        await self._refresh_unclean(tp[0] for tp in affected if ctx.states[tp].leader in dead)
        changed = await self._apply(affected, decide)
        touched = set(changed) | {tp for b in dead for tp in ctx.partitions_on(b)}
        self._send_update_metadata(sorted(touched))

    def _elect_one(self, tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr:
        ctx = self.ctx
        try:
            new, unclean = election.offline_partition(
                ctx.replicas(tp), state, ctx.live, ctx.epoch, self._allows_unclean(tp[0])
            )
            if unclean:
                log.warning("%s-%d: unclean leader election of %d", *tp, new.leader)
            return new
        except election.NoEligibleLeader as exc:
            if state.leader < 0:
                return state
            log.warning("%s-%d is offline: %s", *tp, exc)
            return election.leader_lost(state, ctx.epoch)

    async def _elect_offline(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions with no live leader (or no state yet) get one where possible."""
        ctx = self.ctx
        created: dict[TopicPartition, LeaderAndIsr] = {}
        existing: list[TopicPartition] = []
        for tp in partitions:
            if tp[0] in ctx.deleting:
                continue
            if tp in ctx.states:
                existing.append(tp)
                continue
            try:
                created[tp] = election.new_partition(ctx.replicas(tp), ctx.live, ctx.epoch)
            except election.NoEligibleLeader as exc:
                log.warning("%s-%d cannot start: %s", *tp, exc)

        def decide(tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr | None:
            if ctx.is_live(state.leader):
                return None
            new = self._elect_one(tp, state)
            return None if new == state else new

        await self._refresh_unclean(
            tp[0] for tp in existing if not ctx.is_live(ctx.states[tp].leader)
        )
        changed = await self._apply(existing, decide, created)
        if changed or created:
            self._send_update_metadata(sorted({*changed, *created}))

    # -- controlled shutdown --------------------------------------------------------------
    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[ErrorCode, list]:
        """Move `broker_id`'s leaderships away and take it out of the ISRs; the answer is
        run as an event so it sees and makes decisions in order with everything else."""
        done: asyncio.Future = asyncio.get_running_loop().create_future()

        async def event() -> None:
            try:
                done.set_result(await self._controlled_shutdown(broker_id, broker_epoch))
            except Exception as exc:
                if not done.done():
                    done.set_exception(exc)
                raise

        self.enqueue(event)
        return await done

    async def _controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple:
        ctx = self.ctx
        if ctx is None:
            return ErrorCode.NOT_CONTROLLER, []
        registration = ctx.live.get(broker_id)
        if registration is None:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if broker_epoch >= 0 and broker_epoch != registration.epoch:
            return ErrorCode.STALE_BROKER_EPOCH, []
        ctx.shutting_down.add(broker_id)
        mine = [
            tp
            for tp in ctx.partitions_on(broker_id)
            if tp in ctx.states and tp[0] not in ctx.deleting and len(ctx.replicas(tp)) > 1
        ]
        followed = [tp for tp in mine if ctx.states[tp].leader != broker_id]

        def decide(tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr | None:
            if state.leader == broker_id:
                try:
                    return election.controlled_shutdown(
                        ctx.replicas(tp), state, ctx.live, ctx.shutting_down, ctx.epoch
                    )
                except election.NoEligibleLeader:
                    return None
            return election.without_replicas(state, {broker_id}, ctx.epoch)

        changed = await self._apply(mine, decide)
        # The stopping broker gets no LeaderAndIsr (it would follow, fetch, and be taken
        # back into the ISRs it is leaving): it stops every replica that moved on without
        # it, those it led answering NOT_LEADER_OR_FOLLOWER (retriable) from now on.
        moved = [tp for tp in changed if tp not in followed]
        self._send_stop_replica(broker_id, sorted({*followed, *moved}), delete=False)
        self._send_update_metadata(sorted(changed))
        # What still needs it, and may move on a later try: partitions it leads with another
        # live replica (catching up). With no other replica alive, waiting cannot help.
        remaining = [
            tp
            for tp in ctx.partitions_on(broker_id)
            if ctx.states.get(tp) is not None
            and ctx.states[tp].leader == broker_id
            and any(
                r != broker_id and ctx.is_live(r) and r not in ctx.shutting_down
                for r in ctx.replicas(tp)
            )
        ]
        log.info(
            "controlled shutdown of broker %d: %d leaderships moved, %d remain",
            broker_id,
            sum(1 for tp in changed if tp not in followed),
            len(remaining),
        )
        return ErrorCode.NONE, remaining

    # -- leader elections asked for ----------------------------------------------------
    async def elect_leaders(
        self, partitions: list[TopicPartition] | None, unclean: bool
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """ElectLeaders: the preferred replica (or, `unclean`, any live replica of a
        partition without a leader) becomes leader; run as an event, in order with every
        other decision. None asks for every partition. Raises NotController."""
        return await self._call(lambda: self._elect_leaders(partitions, unclean))

    async def _call(self, decision: Callable[[], Awaitable]):
        """Run `decision` as an event (in order with every other one) and return its result
        to a request handler."""
        done: asyncio.Future = asyncio.get_running_loop().create_future()

        async def event() -> None:
            try:
                done.set_result(await decision())
            except Exception as exc:
                if not done.done():
                    done.set_exception(exc)
                if not isinstance(exc, NotController):
                    raise

        self.enqueue(event)
        return await done

    async def _elect_leaders(
        self, partitions: list[TopicPartition] | None, unclean: bool
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        ctx = self.ctx
        if ctx is None:
            raise NotController(f"broker {self.broker_id} is not the controller")
        results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        eligible: list[TopicPartition] = []
        for tp in partitions if partitions is not None else sorted(ctx.states):
            state = ctx.states.get(tp)
            replicas = ctx.replicas(tp)
            if state is None or not replicas or tp[0] in ctx.deleting:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
            elif unclean and ctx.is_live(state.leader):
                results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, None)
            elif not unclean and state.leader == replicas[0]:
                results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, None)
            else:
                eligible.append(tp)

        def decide(tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr | None:
            if unclean:
                try:
                    return election.offline_partition(
                        ctx.replicas(tp), state, ctx.live, ctx.epoch, unclean=True
                    )[0]
                except election.NoEligibleLeader:
                    return None
            return election.preferred_replica(ctx.replicas(tp), state, ctx.live, ctx.epoch)

        changed = await self._apply(eligible, decide)
        for tp in eligible:
            if tp in changed:
                results[tp] = (ErrorCode.NONE, None)
            elif unclean:
                results[tp] = (
                    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                    f"no replica of {ctx.replicas(tp)} is alive",
                )
            else:
                preferred = ctx.replicas(tp)[0]
                results[tp] = (
                    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                    f"the preferred leader {preferred} is "
                    + ("not in the ISR" if ctx.is_live(preferred) else "not alive"),
                )
        if changed:
            log.info(
                "%s leader election: %d partitions moved",
                "unclean" if unclean else "preferred",
                len(changed),
            )
            self._send_update_metadata(sorted(changed))
        return results

    async def _preferred_election_requested(self) -> None:
        """`/admin/preferred_replica_election` (Kafka's tool writes it): elect, then delete it."""
        if self.ctx is None:
            return
        found = await self.zk.get(z.PREFERRED_REPLICA_ELECTION)
        await self.zk.exists(z.PREFERRED_REPLICA_ELECTION, watch=self._preferred_election_watch)
        if found is None:
            return
        try:
            asked = z.decode_partition_list(found[0], "preferred replica election")
        except z.ZkDataError as exc:
            log.error("ignoring %s: %s", z.PREFERRED_REPLICA_ELECTION, exc)
            asked = []
        results = await self._elect_leaders(asked, unclean=False)
        done = (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)
        failed = {tp: r for tp, r in results.items() if r[0] not in done}
        if failed:
            log.warning("preferred replica election: not done for %s", failed)
        await self.zk.delete(z.PREFERRED_REPLICA_ELECTION)

    async def _rebalance_periodically(self, settings: AutoRebalance) -> None:
        while True:
            await asyncio.sleep(settings.interval_s)
            self.enqueue(lambda: self._check_leader_imbalance(settings.imbalance_percent))

    async def _check_leader_imbalance(self, imbalance_percent: int) -> None:
        """Kafka's automatic rebalance: a broker whose share of the partitions it should
        lead (it is their first replica) but does not lead passes `imbalance_percent`
        gets them back."""
        ctx = self.ctx
        if ctx is None:
            return
        moving: list[TopicPartition] = []
        for broker_id in sorted(ctx.live):
            if broker_id in ctx.shutting_down:
                continue
            preferred = [
                tp
                for tp, state in ctx.states.items()
                if tp[0] not in ctx.deleting and ctx.replicas(tp)[:1] == [broker_id]
            ]
            not_led = [tp for tp in preferred if ctx.states[tp].leader != broker_id]
            if preferred and len(not_led) * 100 > imbalance_percent * len(preferred):
                log.info(
                    "broker %d leads %d of the %d partitions it prefers: rebalancing",
                    broker_id,
                    len(preferred) - len(not_led),
                    len(preferred),
                )
                moving.extend(not_led)
        if moving:
            await self._elect_leaders(sorted(moving), unclean=False)

    # -- partition reassignment ---------------------------------------------------------
    async def alter_reassignments(
        self, asked: dict[TopicPartition, list[int] | None]
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments: move each partition to its target replicas (None:
        cancel the move under way). Checked per partition; one refused changes nothing of
        its own and does not stop the others. Raises NotController."""
        return await self._call(lambda: self._alter_reassignments(asked))

    def reassignments(self, partitions: Iterable[TopicPartition] | None) -> dict:
        """ListPartitionReassignments: the moves under way (all, or of `partitions`), each
        as (replicas, adding, removing). Raises NotController."""
        ctx = self.ctx
        if ctx is None:
            raise NotController(f"broker {self.broker_id} is not the controller")
        wanted = ctx.reassigning if partitions is None else partitions
        return {
            tp: (ctx.replicas(tp), list(m.adding), list(m.removing))
            for tp in sorted(wanted)
            if (m := ctx.reassigning.get(tp)) is not None
        }

    async def _alter_reassignments(
        self, asked: dict[TopicPartition, list[int] | None]
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        ctx = self.ctx
        if ctx is None:
            raise NotController(f"broker {self.broker_id} is not the controller")
        results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        for tp, target in sorted(asked.items()):
            if not ctx.replicas(tp) or tp not in ctx.states or tp[0] in ctx.deleting:
                results[tp] = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"The partition {tp[0]}-{tp[1]} does not exist.",
                )
                continue
            ongoing = ctx.reassigning.get(tp)
            if target is None:
                if ongoing is None:
                    results[tp] = (
                        ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                        f"No reassignment of {tp[0]}-{tp[1]} is in progress.",
                    )
                    continue
                target = ongoing.original
            else:
                problem = reassignment.target_problem(target, ctx.live)
                if problem is not None:
                    results[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
                    continue
            await self._move(tp, list(target))
            results[tp] = (ErrorCode.NONE, None)
        return results

    async def _move(self, tp: TopicPartition, target: list[int]) -> None:
        """Start (or redirect) the move of `tp` to `target`: its replicas become the
        target followed by the leaving ones, under a new leader epoch; replicas an earlier
        target added and this one does not want are stopped again."""
        ctx = self.ctx
        before = ctx.replicas(tp)
        ongoing = ctx.reassigning.get(tp)
        moving = reassignment.redirect(before, ongoing, target)
        if ongoing == moving:
            return  # asked again (e.g. /admin/reassign_partitions rewritten): under way
        if not moving.adding and not moving.removing:
            if ongoing is not None or before != target:
                await self._finish_move(tp, target)  # back to the original: cancelled
            return
        dropped = [r for r in before if r not in moving.replicas]
        ctx.assignments[tp[0]][tp[1]] = moving.replicas
        ctx.reassigning[tp] = moving
        await self._write_assignment(tp[0])
        log.info(
            "%s-%d: reassigning %s -> %s (adding %s, removing %s)",
            *tp,
            moving.original,
            list(moving.target),
            list(moving.adding),
            list(moving.removing),
        )
        await self._apply(
            [tp],
            lambda tp, state: election.replicas_moved(
                moving.replicas, dropped, state, ctx.live, ctx.epoch
            ),
        )
        self._send_update_metadata([tp])
        self._stop_moved_replicas(tp, dropped)
        await self._finish_moves([tp])

    async def _finish_moves(self, partitions: Iterable[TopicPartition]) -> None:
        ctx = self.ctx
        for tp in partitions:
            moving = ctx.reassigning.get(tp)
            if moving is not None and reassignment.is_complete(moving, ctx.states.get(tp)):
                await self._finish_move(tp, list(moving.target))

    async def _finish_move(self, tp: TopicPartition, target: list[int]) -> None:
        """The partition's replicas become `target`: leadership and ISR first (a
        controller taking over after this still sees the move in the assignment znode and
        finishes it), then the assignment, then the leaving replicas are deleted."""
        ctx = self.ctx
        leaving = [r for r in ctx.replicas(tp) if r not in target]
        ctx.assignments[tp[0]][tp[1]] = target
        ctx.reassigning.pop(tp, None)
        await self._apply(
            [tp],
            lambda tp, state: election.replicas_moved(target, leaving, state, ctx.live, ctx.epoch),
        )
        await self._write_assignment(tp[0])
        self._send_update_metadata([tp])
        self._stop_moved_replicas(tp, leaving)
        log.info("%s-%d: reassignment done, replicas %s", *tp, target)
        await self._forget_reassign_request()

    def _stop_moved_replicas(self, tp: TopicPartition, brokers: Iterable[int]) -> None:
        # A broker that is down keeps its copy on disk; nothing leads it there again.
        for broker_id in brokers:
            self._send_stop_replica(broker_id, [tp], delete=True)

    async def _write_assignment(self, topic: str) -> None:
        """The topic's assignment znode as the controller knows it, fenced by its epoch."""
        ctx = self.ctx
        moving = {p: r for (t, p), r in ctx.reassigning.items() if t == topic}
        data = z.encode_assignment(ctx.assignments[topic], moving)
        try:
            await self.zk.commit([self._fence(), ("set", z.topic_path(topic), data, -1)])
        except (BadVersionError, NoNodeError) as exc:
            if getattr(exc, "failed_operation", None) == 0:
                raise Fenced(f"/controller_epoch moved on while writing {topic}") from None
            raise

    async def _reassign_requested(self) -> None:
        """`/admin/reassign_partitions` (Kafka's reassignment tool writes it): start each
        move; the znode keeps the moves under way and goes when they are all done."""
        if self.ctx is None:
            return
        found = await self.zk.get(z.REASSIGN_PARTITIONS)
        await self.zk.exists(z.REASSIGN_PARTITIONS, watch=self._reassign_watch)
        if found is None:
            return
        try:
            asked = z.decode_reassign_request(found[0])
        except z.ZkDataError as exc:
            log.error("ignoring %s: %s", z.REASSIGN_PARTITIONS, exc)
            asked = {}
        results = await self._alter_reassignments(asked)
        for tp, (code, message) in results.items():
            if code != ErrorCode.NONE:
                log.warning("reassignment of %s-%d refused: %s", *tp, message or code.name)
        await self._forget_reassign_request()

    async def _forget_reassign_request(self) -> None:
        """Keep in `/admin/reassign_partitions` only the moves still under way."""
        found = await self.zk.get(z.REASSIGN_PARTITIONS)
        if found is None:
            return
        try:
            asked = z.decode_reassign_request(found[0])
        except z.ZkDataError:
            asked = {}
        remaining = {tp: r for tp, r in asked.items() if tp in self.ctx.reassigning}
        if not remaining:
            await self.zk.delete(z.REASSIGN_PARTITIONS)
        elif remaining != asked:
            await self.zk.set(z.REASSIGN_PARTITIONS, z.encode_reassign_request(remaining))

    # -- topics --------------------------------------------------------------------------
    async def _topics_changed(self) -> None:
        if self.ctx is None:
            return
        topics = set(await self.zk.get_children(z.BROKER_TOPICS, watch=self._topics_watch) or [])
        for topic in sorted(topics - set(self.ctx.assignments)):
            assignment = await self._read_topic(topic)
            if assignment is not None:
                log.info("new topic %s: %d partitions", topic, len(assignment))
                await self._elect_offline([(topic, p) for p in assignment])
        for topic in set(self.ctx.assignments) - topics:
            self._forget_topic(topic)

    async def _topic_changed(self, topic: str) -> None:
        """The topic's assignment changed: partitions were added (CreatePartitions)."""
        if self.ctx is None or topic not in self.ctx.assignments:
            return
        before = set(self.ctx.assignments[topic])
        assignment = await self._read_topic(topic)
        if assignment is None:
            return
        added = [(topic, p) for p in sorted(set(assignment) - before)]
        if added:
            await self._elect_offline(added)

    def _forget_topic(self, topic: str) -> None:
        ctx = self.ctx
        for partition in ctx.assignments.pop(topic, {}):
            ctx.states.pop((topic, partition), None)
        ctx.unclean.pop(topic, None)
        ctx.deleting.discard(topic)
        ctx.deleted_replicas = {r for r in ctx.deleted_replicas if r[0] != topic}
        ctx.reassigning = {tp: r for tp, r in ctx.reassigning.items() if tp[0] != topic}

    async def _deletions_changed(self) -> None:
        ctx = self.ctx
        if ctx is None:
            return
        marked = await self.zk.get_children(z.DELETE_TOPICS, watch=self._deletions_watch) or []
        for topic in marked:
            if topic not in ctx.assignments:
                await self.zk.delete(z.delete_topic_path(topic))  # nothing to delete
                continue
            if topic in ctx.deleting:
                continue
            log.info("deleting topic %s", topic)
            ctx.deleting.add(topic)
            partitions = [(topic, p) for p in ctx.assignments[topic]]
            self._send_update_metadata(partitions)  # gone from every broker's metadata
            self._resume_deletions(set(ctx.live), topics=[topic])
            await self._maybe_finish_deletion(topic)

    def _resume_deletions(self, brokers: set[int], topics: Iterable[str] | None = None) -> None:
        ctx = self.ctx
        for topic in list(topics if topics is not None else ctx.deleting):
            for broker_id in brokers:
                replicas = [
                    (topic, p) for p, r in ctx.assignments.get(topic, {}).items() if broker_id in r
                ]
                if replicas and (topic, broker_id) not in ctx.deleted_replicas:
                    self._send_stop_replica(
                        broker_id,
                        replicas,
                        delete=True,
                        on_done=lambda b=broker_id, t=topic: self.enqueue(
                            lambda: self._replica_deleted(t, b)
                        ),
                    )

    async def _replica_deleted(self, topic: str, broker_id: int) -> None:
        if self.ctx is None or topic not in self.ctx.deleting:
            return
        self.ctx.deleted_replicas.add((topic, broker_id))
        await self._maybe_finish_deletion(topic)

    async def _maybe_finish_deletion(self, topic: str) -> None:
        ctx = self.ctx
        holders = {b for replicas in ctx.assignments.get(topic, {}).values() for b in replicas}
        if not holders <= {b for t, b in ctx.deleted_replicas if t == topic}:
            return  # some replica (maybe on a dead broker) still has it
        await self.zk.delete(z.topic_path(topic), recursive=True)
        await self.zk.delete(z.topic_config_path(topic))
        await self.zk.delete(z.delete_topic_path(topic))
        self._forget_topic(topic)
        log.info("topic %s deleted", topic)

    # -- ISR changes made by leaders --------------------------------------------------------
    async def _isr_changes(self) -> None:
        ctx = self.ctx
        if ctx is None:
            return
        children = (
            await self.zk.get_children(z.ISR_CHANGE_NOTIFICATION, watch=self._isr_watch) or []
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
        fresh = []
        for tp in sorted(changed):
            if tp[0] not in ctx.assignments or tp[0] in ctx.deleting:
                continue
            state = await self._read_state(tp)
            if state is not None:
                ctx.states[tp] = state
                fresh.append(tp)
        if fresh:
            self._send_update_metadata(fresh)
            await self._finish_moves([tp for tp in fresh if tp in ctx.reassigning])

    # -- writing decisions --------------------------------------------------------------
    async def _apply(
        self,
        partitions: Iterable[TopicPartition],
        decide: Callable[[TopicPartition, LeaderAndIsr], LeaderAndIsr | None],
        created: dict[TopicPartition, LeaderAndIsr] | None = None,
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """Decide each partition's new state from its current one, write it (fenced by the
        controller epoch; a leader that changed the ISR meanwhile makes us read the state
        again and decide again), then tell the replicas. Returns what was written."""
        ctx = self.ctx
        written: dict[TopicPartition, LeaderAndIsr] = {}
        new: set[TopicPartition] = set()
        for tp, state in (created or {}).items():
            stored = await self._create_state(tp, state)
            if stored is not None:
                written[tp] = stored
                new.add(tp)
        for tp in partitions:
            for _ in range(5):
                current = ctx.states.get(tp)
                decided = decide(tp, current) if current is not None else None
                if decided is None:
                    break
                stored = await self._write_state(tp, decided)
                if stored is not None:
                    written[tp] = stored
                    break
                fresh = await self._read_state(tp)
                if fresh is None:
                    break
                ctx.states[tp] = fresh
            else:
                log.error("%s-%d: could not write the partition state", *tp)
        ctx.states.update(written)
        for tp, state in sorted(written.items()):
            log.info(
                "%s-%d: leader %d, epoch %d, ISR %s",
                *tp,
                state.leader,
                state.leader_epoch,
                list(state.isr),
            )
        self._send_leader_and_isr(sorted(written), new=new)
        return written

    def _fence(self) -> tuple:
        return ("check", z.CONTROLLER_EPOCH, self.ctx.epoch_zk_version)

    async def _create_state(self, tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr | None:
        path = z.partition_state_path(*tp)
        await self.zk.ensure_paths([path.rsplit("/", 1)[0]])
        try:
            await self.zk.commit([self._fence(), ("create", path, z.encode_partition_state(state))])
            return state.with_version(0)
        except (BadVersionError, NoNodeError, NodeExistsError) as exc:
            if getattr(exc, "failed_operation", None) == 0:
                raise Fenced(f"/controller_epoch moved on while creating {path}") from None
            return await self._read_state(tp)  # created meanwhile: take what is there

    async def _write_state(self, tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr | None:
        """The stored state, or None when the znode changed since we read it."""
        path = z.partition_state_path(*tp)
        data = z.encode_partition_state(state)
        try:
            results = await self.zk.commit([self._fence(), ("set", path, data, state.zk_version)])
        except (BadVersionError, NoNodeError) as exc:
            if getattr(exc, "failed_operation", None) == 0:
                raise Fenced(f"/controller_epoch moved on while writing {path}") from None
            return None
        return state.with_version(results[1].version)

    # -- requests to brokers -----------------------------------------------------------
    def _open_channel(self, broker_id: int) -> None:
        registration = self.ctx.live[broker_id]
        endpoint = registration.endpoint(self.listener) or registration.endpoints[0]
        channel = self._channels.get(broker_id)
        if channel is not None and not channel.closed:
            channel.node.update_endpoint(endpoint)
            return
        node = NodeClient(
            broker_id, endpoint, client_id=f"controller-{self.broker_id}", security=self.security
        )
        self._channels[broker_id] = RequestChannel(node, request_timeout_s=self.request_timeout_s)

    def _send(self, broker_id: int, api, body: dict, on_response=None) -> None:
        channel = self._channels.get(broker_id)
        if channel is None or channel.closed:
            return
        channel.enqueue(
            api.key,
            api.max_version,
            body,
            on_response or (lambda response: _log_errors(api.name, broker_id, response)),
        )

    def _send_leader_and_isr(
        self,
        partitions: Iterable[TopicPartition],
        *,
        only: set[int] | None = None,
        new: set[TopicPartition] = frozenset(),
    ) -> None:
        ctx = self.ctx
        per_broker: dict[int, dict[str, list[dict]]] = {}
        leaders: dict[int, set[int]] = {}
        for tp in partitions:
            state = ctx.states.get(tp)
            if state is None:
                continue
            replicas = ctx.replicas(tp)
            moving = ctx.reassigning.get(tp)
            for broker_id in replicas:
                if not ctx.is_live(broker_id) or (only is not None and broker_id not in only):
                    continue
                if broker_id in ctx.shutting_down:
                    continue
                per_broker.setdefault(broker_id, {}).setdefault(tp[0], []).append(
                    {
                        "partition_index": tp[1],
                        "controller_epoch": state.controller_epoch,
                        "leader": state.leader,
                        "leader_epoch": state.leader_epoch,
                        "isr": list(state.isr),
                        "zk_version": state.zk_version,
                        "replicas": list(replicas),
                        "adding_replicas": list(moving.adding) if moving else [],
                        "removing_replicas": list(moving.removing) if moving else [],
                        "is_new": tp in new,
                    }
                )
                leaders.setdefault(broker_id, set()).add(state.leader)
        for broker_id, topics in per_broker.items():
            live_leaders = []
            for leader in sorted(leaders[broker_id]):
                registration = ctx.live.get(leader)
                if registration is None:
                    continue
                endpoint = registration.endpoint(self.listener) or registration.endpoints[0]
                live_leaders.append(
                    {"broker_id": leader, "host_name": endpoint.host, "port": endpoint.port}
                )
            self._send(
                broker_id,
                LEADER_AND_ISR_API,
                {
                    "controller_id": self.broker_id,
                    "controller_epoch": ctx.epoch,
                    "broker_epoch": ctx.live[broker_id].epoch,
                    "topic_states": [
                        {"topic_name": t, "partition_states": states}
                        for t, states in sorted(topics.items())
                    ],
                    "live_leaders": live_leaders,
                },
            )

    def _send_update_metadata(self, partitions: Iterable[TopicPartition]) -> None:
        ctx = self.ctx
        topics: dict[str, list[dict]] = {}
        for tp in partitions:
            replicas = ctx.replicas(tp)
            state = ctx.states.get(tp)
            if state is None and tp[0] not in ctx.deleting:
                continue
            deleting = tp[0] in ctx.deleting
            topics.setdefault(tp[0], []).append(
                {
                    "partition_index": tp[1],
                    "controller_epoch": state.controller_epoch if state else ctx.epoch,
                    "leader": LEADER_DURING_DELETE if deleting else state.leader,
                    "leader_epoch": state.leader_epoch if state else 0,
                    "isr": list(state.isr) if state else [],
                    "zk_version": state.zk_version if state else 0,
                    "replicas": list(replicas),
                    "offline_replicas": [r for r in replicas if not ctx.is_live(r)],
                }
            )
        live_brokers = [
            {
                "id": registration.broker_id,
                "endpoints": [
                    {
                        "port": e.port,
                        "host": e.host,
                        "listener": e.listener,
                        "security_protocol": SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0),
                    }
                    for e in registration.endpoints
                ],
                "rack": registration.rack,
            }
            for registration in sorted(ctx.live.values(), key=lambda r: r.broker_id)
        ]
        for broker_id, registration in sorted(ctx.live.items()):
            self._send(
                broker_id,
                UPDATE_METADATA_API,
                {
                    "controller_id": self.broker_id,
                    "controller_epoch": ctx.epoch,
                    "broker_epoch": registration.epoch,
                    "topic_states": [
                        {"topic_name": t, "partition_states": states}
                        for t, states in sorted(topics.items())
                    ],
                    "live_brokers": live_brokers,
                },
            )

    def _send_stop_replica(
        self,
        broker_id: int,
        partitions: list[TopicPartition],
        *,
        delete: bool,
        on_done: Callable[[], None] | None = None,
    ) -> None:
        ctx = self.ctx
        if not partitions or broker_id not in ctx.live:
            return
        topics: dict[str, list[int]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, []).append(partition)

        def answered(response: dict) -> None:
            _log_errors("StopReplica", broker_id, response)
            if on_done is not None and response.get("error_code") == ErrorCode.NONE:
                on_done()

        self._send(
            broker_id,
            STOP_REPLICA_API,
            {
                "controller_id": self.broker_id,
                "controller_epoch": ctx.epoch,
                "broker_epoch": ctx.live[broker_id].epoch,
                "delete_partitions": delete,
                "topics": [
                    {"name": t, "partition_indexes": sorted(p)} for t, p in sorted(topics.items())
                ],
            },
            answered,
        )


def _log_errors(api: str, broker_id: int, response: dict) -> None:
    if response.get("error_code"):
        log.warning("%s to broker %d: error %s", api, broker_id, response["error_code"])
    for error in response.get("partition_errors") or ():
        if error["error_code"]:
            log.warning(
                "%s to broker %d: %s-%d error %s",
                api,
                broker_id,
                error["topic_name"],
                error["partition_index"],
                error["error_code"],
            )
