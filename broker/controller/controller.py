"""The cluster's controller: the one broker that decides leaders and tells the others.

Whoever creates the ephemeral `/controller` znode is the controller; it increments
`/controller_epoch` and fences every state write it makes with a check on that znode's
version (broker/controller/store.py), so a controller that lost its place cannot
overwrite its successor's decisions, and brokers refuse requests carrying an older
epoch. It reacts to one event at a time (broker/controller/events.py: named events, each
run under a ControllerState), from one queue that ZooKeeper watches, request handlers,
brokers' answers and the rebalance timer feed:

- a broker joins: it gets the metadata and the leadership of its replicas; offline
  partitions it can lead are elected (leadership.py);
- a broker dies (its session ends): partitions it led get a new leader from the ISR
  (offline when none may lead), it leaves the ISRs it was in (leadership.py);
- a broker shuts down cleanly: its leaderships move first (shutdown.py);
- a topic appears, or gets partitions: they are initialised (first live replica leads);
- a topic is marked for deletion: it leaves the metadata, its replicas are stopped and
  deleted, then its znodes (deletion.py);
- a leader changed an ISR: the new state goes to every broker's metadata;
- leaders are asked for (ElectLeaders, `/admin/preferred_replica_election`, or the
  automatic rebalance of `auto.leader.rebalance.enable`): leadership.py;
- partitions are reassigned (AlterPartitionReassignments, `/admin/reassign_partitions`):
  reassignment.py.

This module holds the queue, the controller's own election and activation, what it
reads of the cluster, and the two ways a decision leaves it: `apply` writes new
partition states, the `send_*` methods send the requests built by requests.py through
one ordered, retried channel per broker (channels.py). The layout of what it reads and
writes is docs/contracts/cluster.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from broker.cluster import BrokerRegistration, LeaderAndIsr, NotController, TopicPartition
from broker.controller import deletion, leadership, reassignment, requests, shutdown
from broker.controller.channels import BrokerChannels, log_errors, succeeded
from broker.controller.context import ControllerContext
from broker.controller.events import (
    AutoLeaderBalance,
    BrokerChange,
    ControlledShutdown,
    ControllerChange,
    ControllerEvent,
    ControllerState,
    ControllerStats,
    IsrChangeNotification,
    LeaderElection,
    LogDirEventNotification,
    PartitionModifications,
    PartitionReassignment,
    PreferredReplicaElection,
    Reconnected,
    Reelect,
    ReplicaDeleted,
    ReplicasOffline,
    Reply,
    SessionRenewed,
    Startup,
    TopicChange,
    TopicDeletion,
    ZkPartitionReassignment,
)
from broker.controller.store import ControllerStore, Fenced
from broker.protocol.apis import LEADER_AND_ISR_API, STOP_REPLICA_API, UPDATE_METADATA_API
from broker.protocol.errors import ErrorCode
from broker.util.clock import now_ms
from broker.zk.client import ConnectionLoss

log = logging.getLogger(__name__)

UNCLEAN_KEY = "unclean.leader.election.enable"

Decide = Callable[[TopicPartition, LeaderAndIsr], LeaderAndIsr | None]


@dataclass(frozen=True)
class AutoRebalance:
    """auto.leader.rebalance.enable and its settings: every `interval_s`, a broker leading
    fewer than (100 - `imbalance_percent`)% of the partitions it is the preferred leader
    of gets them back (where it is in sync)."""

    imbalance_percent: int = 10
    interval_s: float = 300.0


class Controller:
    def __init__(
        self,
        broker_id: int,
        store: ControllerStore,
        channels: BrokerChannels,
        *,
        listener: str,
        unclean_default: bool | Callable[[], bool],
        on_change: Callable[[int | None], None] = lambda controller_id: None,
        auto_rebalance: AutoRebalance | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.store = store
        self.channels = channels
        self.listener = listener  # the inter-broker listener: leaders are named by it
        self.unclean_default = unclean_default
        self.on_change = on_change  # told the active controller's id (or None)
        self.auto_rebalance = auto_rebalance
        self.ctx: ControllerContext | None = None
        self.active_controller: int | None = None
        self.stats = ControllerStats()
        self._events: asyncio.Queue[ControllerEvent] = asyncio.Queue()
        self._runner: asyncio.Task | None = None
        self._stopped = False
        self._rebalance_timer: asyncio.Task | None = None
        self._reconnect_pending = False  # a Reconnected is due (or queued)

    @property
    def is_active(self) -> bool:
        return self.ctx is not None

    @property
    def state(self) -> ControllerState:
        """The state of the event being processed (Idle between events)."""
        return self.stats.state

    @property
    def queue_size(self) -> int:
        return self._events.qsize()

    # -- the event queue ------------------------------------------------------------------
    def start(self) -> None:
        self._stopped = False
        self._runner = asyncio.get_running_loop().create_task(self._run(), name="controller")
        self.enqueue(Startup())

    async def stop(self) -> None:
        """Stop acting and resign (our /controller goes with the session or is deleted)."""
        self._stopped = True
        if self.is_active:
            await self._abdicate()
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
            self._runner = None

    def enqueue(self, event: ControllerEvent) -> None:
        if not self._stopped:
            self._events.put_nowait(event)

    def session_renewed(self) -> None:
        """A new ZooKeeper session: our /controller (if any) and every watch are gone."""
        self.enqueue(SessionRenewed())

    async def _run(self) -> None:
        while True:
            event = await self._events.get()
            self.stats.state = event.state
            started = time.perf_counter()
            requests, operations = self.store.counts.snapshot()
            try:
                await self._answer(event)
            except Fenced as exc:
                log.warning("controller %d fenced: %s", self.broker_id, exc)
                await self._abdicate()
                self.enqueue(Reelect())
            except asyncio.CancelledError:
                raise
            except ConnectionLoss:
                log.warning(
                    "controller event %s (%s) cut short: ZooKeeper connection lost; "
                    "taking the controller's place again once reconnected",
                    event.name,
                    event.state,
                )
                self._reconnect_when_connected()
            except Exception:
                log.exception("controller event %s (%s) failed", event.name, event.state)
            finally:
                seconds = time.perf_counter() - started
                requests = self.store.counts.requests - requests
                operations = self.store.counts.operations - operations
                self.stats.ran(event, seconds, requests, operations)
                self.stats.state = ControllerState.IDLE
                log.info(
                    "controller event %s (%s): %.1f ms, ZooKeeper %d requests, %d operations",
                    event.name,
                    event.state,
                    seconds * 1e3,
                    requests,
                    operations,
                )

    async def _answer(self, event: ControllerEvent) -> None:
        """Process the event; one someone awaits gets its result or its exception (a
        NotController goes to them alone: nothing failed here)."""
        if not isinstance(event, Reply):
            await self._process(event)
            return
        try:
            result = await self._process(event)
        except Exception as exc:
            if not event.reply.done():
                event.reply.set_exception(exc)
            if not isinstance(exc, NotController):
                raise
        else:
            if not event.reply.done():
                event.reply.set_result(result)

    async def _process(self, event: ControllerEvent):
        match event:
            case Startup() | Reelect():
                await self._elect()
            case ControllerChange():
                await self._controller_changed()
            case SessionRenewed():
                await self._resign()
                await self._elect()
            case Reconnected():
                await self._reconnected()
            case BrokerChange():
                await self._brokers_changed()
            case TopicChange():
                await self._topics_changed()
            case PartitionModifications(topic=topic):
                await self._topic_changed(topic)
            case TopicDeletion():
                await deletion.topics_marked(self)
            case ReplicaDeleted(topic=topic, broker_id=broker_id):
                await deletion.replica_deleted(self, topic, broker_id)
            case IsrChangeNotification():
                await self._isr_changes()
            case LogDirEventNotification():
                await self._log_dir_events()
            case ReplicasOffline(broker_id=broker_id, partitions=partitions):
                await leadership.replicas_on_offline_dir(self, broker_id, partitions)
            case ControlledShutdown(broker_id=broker_id, broker_epoch=broker_epoch):
                return await shutdown.controlled_shutdown(self, broker_id, broker_epoch)
            case LeaderElection(partitions=partitions, unclean=unclean):
                return await leadership.elect_leaders(self, partitions, unclean)
            case PreferredReplicaElection():
                await leadership.preferred_replica_election(self)
            case AutoLeaderBalance(imbalance_percent=imbalance_percent):
                await leadership.check_imbalance(self, imbalance_percent)
            case PartitionReassignment(asked=asked):
                return await reassignment.alter(self, asked)
            case ZkPartitionReassignment():
                await reassignment.zk_requested(self)
            case _:
                raise TypeError(f"no handling for controller event {event!r}")
        return None

    async def _call(self, event_type: type[Reply], **fields):
        """Run a request handler's event, in order with every other one; its result."""
        done: asyncio.Future = asyncio.get_running_loop().create_future()
        self.enqueue(event_type(reply=done, **fields))
        return await done

    def watch(self, event: ControllerEvent) -> Callable[[], None]:
        """A store watch that enqueues `event` when it fires."""
        return lambda: self.enqueue(event)

    # -- asked for by request handlers ------------------------------------------------------
    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[ErrorCode, list]:
        """Move `broker_id`'s leaderships away and take it out of the ISRs; the answer is
        run as an event so it sees and makes decisions in order with everything else."""
        return await self._call(ControlledShutdown, broker_id=broker_id, broker_epoch=broker_epoch)

    async def elect_leaders(
        self, partitions: list[TopicPartition] | None, unclean: bool
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """ElectLeaders: the preferred replica (or, `unclean`, any live replica of a
        partition without a leader) becomes leader; run as an event, in order with every
        other decision. None asks for every partition. Raises NotController."""
        return await self._call(LeaderElection, partitions=partitions, unclean=unclean)

    async def alter_reassignments(
        self, asked: dict[TopicPartition, list[int] | None]
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments: move each partition to its target replicas (None:
        cancel the move under way). Checked per partition; one refused changes nothing of
        its own and does not stop the others. Raises NotController."""
        return await self._call(PartitionReassignment, asked=asked)

    def reassignments(self, partitions: Iterable[TopicPartition] | None) -> dict:
        """ListPartitionReassignments: the moves under way (all, or of `partitions`), each
        as (replicas, adding, removing). Raises NotController."""
        return reassignment.under_way(self.active_context(), partitions)

    def active_context(self) -> ControllerContext:
        """The context, for decisions only the active controller makes."""
        if self.ctx is None:
            raise NotController(f"broker {self.broker_id} is not the controller")
        return self.ctx

    # -- who is the controller --------------------------------------------------------------
    async def _elect(self) -> None:
        if self._stopped or self.is_active:
            return
        if not await self.store.create_controller(self.broker_id, now_ms()):
            active = await self.store.read_controller(watch=self.watch(ControllerChange()))
            if active is None:  # gone between the create and the read: try again
                self.enqueue(Reelect())
                return
            self._set_active(active)
            return
        self._set_active(self.broker_id)
        await self.store.watch_controller(self.watch(ControllerChange()))
        await self._activate()

    def _reconnect_when_connected(self) -> None:
        if not self._reconnect_pending:
            self._reconnect_pending = True
            self.store.when_connected(lambda: self.enqueue(Reconnected()))

    async def _reconnected(self) -> None:
        """An event failed on a lost connection: the watch it was setting is gone (every
        other one fired when the connection dropped, and their events re-read) and what
        it decided may be half written or unsent (F2 in docs/faults.md). As Kafka's
        controller re-registers its watches and handlers: whoever holds /controller now is
        followed; when it is still ours, we take our place again as a newly elected
        controller does, reading everything (watches set again) under a new epoch, so
        every broker gets our decisions afresh (docs/contracts/cluster.md, "Controller
        failover")."""
        self._reconnect_pending = False
        active = await self.store.read_controller(watch=self.watch(ControllerChange()))
        if active != self.broker_id:
            await self._resign()
            self._set_active(active)
            if active is None:
                await self._elect()
            return
        log.warning("broker %d takes its place as controller again", self.broker_id)
        await self._resign()
        self._set_active(self.broker_id)
        await self._activate()

    async def _controller_changed(self) -> None:
        active = await self.store.read_controller(watch=self.watch(ControllerChange()))
        if active is None:
            await self._resign()
            await self._elect()
            return
        if active != self.broker_id and self.is_active:
            await self._resign()
        self._set_active(active)

    async def _abdicate(self) -> None:
        """Resign and delete our /controller, so that an election happens at once (a
        fenced controller whose session lives would otherwise block everyone)."""
        await self._resign()
        try:
            await self.store.resign_controller(self.broker_id)
        except Exception:  # the session may be gone already: the node went with it
            log.debug("could not delete /controller", exc_info=True)

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
        await self.channels.close_all()

    # -- becoming the controller ------------------------------------------------------------
    async def _activate(self) -> None:
        epoch, version = await self.store.increment_epoch()
        self.ctx = ControllerContext(self.broker_id, self.listener, epoch, version)
        log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
        await self.store.ensure_paths()
        await self._read_brokers()
        await self._read_topics()
        log.info(
            "live brokers %s, %d topics, %d partitions",
            sorted(self.ctx.live),
            len(self.ctx.assignments),
            len(self.ctx.states),
        )
        # Brokers that restarted while nobody was controller (registered after the states
        # naming them were written) are first gone, then started, as a BrokerChange with
        # their new epochs has them: keeping their leaderships would have followers
        # truncate to what they lost (docs/contracts/cluster.md, "Controller failover").
        registered = self.ctx.live
        restarted = leadership.restarted_since_decided(self.ctx)
        if restarted:
            log.warning("brokers %s restarted since their leaderships", sorted(restarted))
            self.ctx.live = {b: r for b, r in registered.items() if b not in restarted}
        for registration in self.ctx.live.values():
            self.channels.open(registration)
        # Every broker gets the whole picture, and each live replica its leadership.
        # (One pass over the partitions builds every broker's LeaderAndIsr.)
        self.send_update_metadata(self.ctx.partitions())
        self.send_leader_and_isr(self.ctx.partitions())
        # Brokers that died (or restarted) while nobody was controller: their leaderships
        # and ISR places.
        gone = {r for st in self.ctx.states.values() for r in (st.leader, *st.isr)}
        gone -= set(self.ctx.live) | {-1}
        if gone:
            await leadership.replicas_offline(self, gone)
        if restarted:
            self.ctx.live = registered
            for broker_id in restarted:
                self.channels.open(registered[broker_id])
            await self._on_brokers_started(restarted)  # elects offline partitions too
        else:
            await leadership.elect_offline(self, self.ctx.partitions())
        await deletion.topics_marked(self)
        await self._isr_changes()
        await self._log_dir_events()
        await leadership.preferred_replica_election(self)
        await reassignment.zk_requested(self)
        await reassignment.finish_moves(self, sorted(self.ctx.reassigning))  # caught up meanwhile
        if self.auto_rebalance is not None:
            self._rebalance_timer = asyncio.get_running_loop().create_task(
                self._rebalance_periodically(self.auto_rebalance), name="leader-rebalance"
            )

    async def _rebalance_periodically(self, settings: AutoRebalance) -> None:
        while True:
            await asyncio.sleep(settings.interval_s)
            self.enqueue(AutoLeaderBalance(settings.imbalance_percent))

    # -- reading the cluster ------------------------------------------------------------------
    async def _read_brokers(self) -> dict[int, BrokerRegistration]:
        live = await self.store.read_brokers(self.watch(BrokerChange()))
        if self.ctx is not None and not self.ctx.live:
            self.ctx.live = live
        return live

    async def _read_topics(self) -> None:
        topics = await self.store.topic_names(self.watch(TopicChange()))
        # Read together: each topic's reads are awaited before any of it is taken in.
        await asyncio.gather(*(self._read_topic(topic) for topic in topics))

    async def _read_topic(self, topic: str) -> dict[int, list[int]] | None:
        found, config, states = await asyncio.gather(
            self.store.read_topic(topic, self.watch(PartitionModifications(topic))),
            self.store.read_topic_config(topic),
            self.store.read_topic_states(topic),
        )
        if found is None:
            return None
        assignment, moving = found
        ctx = self.ctx
        ctx.assignments[topic] = assignment
        ctx.reassigning = {tp: r for tp, r in ctx.reassigning.items() if tp[0] != topic}
        ctx.reassigning.update({(topic, p): r for p, r in moving.items()})
        self._take_unclean(topic, config)
        ctx.states.update({(topic, p): state for p, state in states.items() if p in assignment})
        return assignment

    def _take_unclean(self, topic: str, overrides: dict[str, str]) -> None:
        value = overrides.get(UNCLEAN_KEY)
        self.ctx.unclean[topic] = None if value is None else value.strip().lower() == "true"

    async def refresh_unclean(self, topics: Iterable[str]) -> None:
        """Read again whether these topics allow unclean elections: their configs change at
        run time (AlterConfigs), and an election about to happen must follow the change."""
        topics = sorted(set(topics))
        configs = await asyncio.gather(*(self.store.read_topic_config(t) for t in topics))
        for topic, config in zip(topics, configs, strict=True):
            self._take_unclean(topic, config)

    def allows_unclean(self, topic: str) -> bool:
        override = self.ctx.unclean.get(topic)
        if override is not None:
            return override
        default = self.unclean_default
        return default() if callable(default) else default

    # -- brokers coming and going ---------------------------------------------------------
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
        for broker_id, registration in now_live.items():
            if broker_id in new or broker_id not in self.channels:
                self.channels.open(registration)
        if new:
            await self._on_brokers_started(new)

    async def _on_brokers_started(self, new: set[int]) -> None:
        ctx = self.ctx
        log.info("brokers started: %s", sorted(new))
        ctx.shutting_down -= new
        self.send_update_metadata(ctx.partitions())
        for broker_id in new:
            mine = [tp for tp in ctx.partitions_on(broker_id) if tp[0] not in ctx.deleting]
            self.send_leader_and_isr(mine, only={broker_id})
        await leadership.elect_offline(self, ctx.partitions())
        deletion.resume(self, new)

    async def _on_brokers_failed(self, dead: set[int]) -> None:
        ctx = self.ctx
        log.info("brokers failed: %s", sorted(dead))
        for broker_id in dead:
            ctx.live.pop(broker_id, None)
            ctx.shutting_down.discard(broker_id)
            # It comes back with its log dirs checked again at start-up.
            ctx.offline_dir_replicas.pop(broker_id, None)
            await self.channels.close(broker_id)
        await leadership.replicas_offline(self, dead)

    # -- topics -------------------------------------------------------------------------------
    async def _topics_changed(self) -> None:
        if self.ctx is None:
            return
        topics = set(await self.store.topic_names(self.watch(TopicChange())))
        new = sorted(topics - set(self.ctx.assignments))
        # Every new topic read, then their partitions elected in one decision.
        assignments = await asyncio.gather(*(self._read_topic(topic) for topic in new))
        started: list[TopicPartition] = []
        for topic, assignment in zip(new, assignments, strict=True):
            if assignment is not None:
                log.info("new topic %s: %d partitions", topic, len(assignment))
                started.extend((topic, p) for p in assignment)
        if started:
            await leadership.elect_offline(self, started)
        for topic in set(self.ctx.assignments) - topics:
            self.ctx.forget_topic(topic)

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
            await leadership.elect_offline(self, added)

    # -- ISR changes made by leaders ----------------------------------------------------------
    async def _isr_changes(self) -> None:
        ctx = self.ctx
        if ctx is None:
            return
        changed = await self.store.take_isr_changes(self.watch(IsrChangeNotification()))
        known = [tp for tp in changed if tp[0] in ctx.assignments and tp[0] not in ctx.deleting]
        states = await self.store.read_states(known) if known else {}
        ctx.states.update(states)
        fresh = sorted(states)
        if fresh:
            self.send_update_metadata(fresh)
            await reassignment.finish_moves(self, [tp for tp in fresh if tp in ctx.reassigning])

    # -- log dir failures ---------------------------------------------------------------------
    async def _log_dir_events(self) -> None:
        """Brokers said a log dir failed: as Kafka, each gets a LeaderAndIsr for all its
        replicas, and the ones it answers KAFKA_STORAGE_ERROR for are offline
        (ReplicasOffline): their leadership moves and they leave the ISRs
        (docs/contracts/cluster.md, "Log directory failure")."""
        ctx = self.ctx
        if ctx is None:
            return
        brokers = await self.store.take_log_dir_events(self.watch(LogDirEventNotification()))
        for broker_id in sorted(brokers):
            if not ctx.is_live(broker_id):
                continue  # gone: BrokerChange moves its leaderships
            log.warning("broker %d reports a failed log dir", broker_id)
            for target, body in requests.leader_and_isr(
                ctx, ctx.partitions_on(broker_id), only={broker_id}
            ).items():
                self.channels.send(
                    target, LEADER_AND_ISR_API, body, self._offline_replicas_of(target)
                )

    def _offline_replicas_of(self, broker_id: int) -> Callable[[dict], None]:
        """What a LeaderAndIsr answer says: its errors are logged, and replicas in a
        failed log dir (KAFKA_STORAGE_ERROR) are taken offline, as Kafka's controller."""

        def answered(response: dict) -> None:
            log_errors("LeaderAndIsr", broker_id, response)
            offline = frozenset(
                (e["topic_name"], e["partition_index"])
                for e in response.get("partition_errors") or ()
                if e["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
            )
            if offline:
                self.enqueue(ReplicasOffline(broker_id, offline))

        return answered

    # -- writing decisions --------------------------------------------------------------------
    async def apply(
        self,
        partitions: Iterable[TopicPartition],
        decide: Decide,
        created: dict[TopicPartition, LeaderAndIsr] | None = None,
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """Decide each partition's new state from its current one, write them together
        (fenced by the controller epoch; partitions whose state a leader changed meanwhile
        are read again and decided again), then tell the replicas. Returns what was
        written. A few store requests per event, however many partitions."""
        ctx = self.ctx
        written: dict[TopicPartition, LeaderAndIsr] = {}
        new: set[TopicPartition] = set()
        if created:
            written.update(await self.store.create_states(created, ctx.epoch_zk_version))
            new.update(written)
        pending = list(partitions)
        for _ in range(5):
            decided = {}
            for tp in pending:
                current = ctx.states.get(tp)
                state = decide(tp, current) if current is not None else None
                if state is not None:
                    decided[tp] = state
            if not decided:
                break
            stored = await self.store.write_states(decided, ctx.epoch_zk_version)
            written.update(stored)
            lost = [tp for tp in decided if tp not in stored]
            if not lost:
                break
            fresh = await self.store.read_states(lost)
            ctx.states.update(fresh)
            pending = [tp for tp in lost if tp in fresh]  # one gone is not decided again
        else:
            for tp in pending:
                log.error("%s-%d: could not write the partition state", *tp)
        ctx.states.update(written)
        # One line per event at INFO; the per-partition states at DEBUG (Kafka's
        # state-change log). A line per partition cost 7 % of the controller's CPU when a
        # failover moved 3,000 leaders (docs/benchmarks.md).
        if written:
            leaders = sorted({state.leader for state in written.values()})
            log.info(
                "%d partition states written; leaders now on brokers %s", len(written), leaders
            )
        if log.isEnabledFor(logging.DEBUG):
            for tp, state in sorted(written.items()):
                log.debug(
                    "%s-%d: leader %d, epoch %d, ISR %s",
                    *tp,
                    state.leader,
                    state.leader_epoch,
                    list(state.isr),
                )
        self.send_leader_and_isr(sorted(written), new=new)
        return written

    # -- requests to brokers: one per broker, built by requests.py ------------------------------
    def send_leader_and_isr(
        self,
        partitions: Iterable[TopicPartition],
        *,
        only: set[int] | None = None,
        new: set[TopicPartition] = frozenset(),
    ) -> None:
        for broker_id, body in requests.leader_and_isr(
            self.ctx, partitions, only=only, new=new
        ).items():
            self.channels.send(
                broker_id, LEADER_AND_ISR_API, body, self._offline_replicas_of(broker_id)
            )

    def send_update_metadata(self, partitions: Iterable[TopicPartition]) -> None:
        for broker_id, body in requests.update_metadata(self.ctx, partitions).items():
            self.channels.send(broker_id, UPDATE_METADATA_API, body)

    def send_stop_replica(
        self,
        broker_id: int,
        partitions: list[TopicPartition],
        *,
        delete: bool,
        on_done: Callable[[], None] | None = None,
    ) -> None:
        """StopReplica to the broker; `on_done` once it answered without error."""
        body = requests.stop_replica(self.ctx, broker_id, partitions, delete=delete)
        if body is None:
            return

        def answered(response: dict) -> None:
            log_errors("StopReplica", broker_id, response)
            if on_done is not None and succeeded(response):
                on_done()

        self.channels.send(broker_id, STOP_REPLICA_API, body, answered)
