"""Who leads each partition, as the controller's events change it: replicas going
offline, partitions without a live leader (or without a state yet), brokers a controller
taking over finds restarted since their leaderships were decided, leader elections
asked for (ElectLeaders, `/admin/preferred_replica_election`) and the automatic
rebalance. The decisions themselves are broker/controller/election.py's pure functions;
here they are applied to the controller's context (broker/controller/controller.py
writes and sends them).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from broker.cluster import LeaderAndIsr, TopicPartition
from broker.controller import election
from broker.controller.context import ControllerContext
from broker.controller.events import PreferredReplicaElection
from broker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.controller.controller import Controller

log = logging.getLogger(__name__)

Results = dict[TopicPartition, tuple[ErrorCode, str | None]]


async def replicas_offline(c: Controller, dead: set[int]) -> None:
    """Partitions led by `dead` brokers get new leaders; they leave every ISR."""
    ctx = c.ctx

    def decide(tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr | None:
        if state.leader in dead:
            return elect_one(c, tp, state)
        if dead & set(state.isr):
            return election.without_replicas(state, dead, ctx.epoch)
        return None

    affected = [tp for tp in ctx.states if tp[0] not in ctx.deleting]
    await c.refresh_unclean(tp[0] for tp in affected if ctx.states[tp].leader in dead)
    changed = await c.apply(affected, decide)
    touched = set(changed) | {tp for b in dead for tp in ctx.partitions_on(b)}
    c.send_update_metadata(sorted(touched))


def restarted_since_decided(ctx: ControllerContext) -> set[int]:
    """Live brokers that registered after a partition state naming them leader or in sync
    was written: they restarted since that was decided, while no controller saw it (a
    live one gets a BrokerChange with their new epoch), and may have lost what they had
    not flushed. A controller taking over treats them as that BrokerChange would: gone,
    then started (docs/contracts/cluster.md, "Controller failover"). States of unknown
    zxid (-1) name nobody."""
    restarted: set[int] = set()
    for state in ctx.states.values():
        if state.zxid < 0:
            continue
        for broker_id in (state.leader, *state.isr):
            registration = ctx.live.get(broker_id)
            if registration is not None and registration.epoch > state.zxid:
                restarted.add(broker_id)
    return restarted


async def replicas_on_offline_dir(
    c: Controller, broker_id: int, partitions: frozenset[TopicPartition]
) -> None:
    """`broker_id`'s replicas of `partitions` are in a failed log dir: partitions it
    leads get a leader among the other in-sync replicas, and it leaves their ISRs
    (it fetches them no more, so it cannot come back in until it restarts)."""
    ctx = c.ctx
    if ctx is None or not ctx.is_live(broker_id):
        return

    def decide(tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr | None:
        return election.replica_offline(
            ctx.replicas(tp), state, broker_id, ctx.live, ctx.epoch, c.allows_unclean(tp[0])
        )

    affected = [tp for tp in sorted(partitions) if tp in ctx.states and tp[0] not in ctx.deleting]
    await c.refresh_unclean(tp[0] for tp in affected if ctx.states[tp].leader == broker_id)
    changed = await c.apply(affected, decide)
    ctx.offline_dir_replicas.setdefault(broker_id, set()).update(partitions)
    if changed:
        log.info("moved %d partitions off broker %d's failed log dir", len(changed), broker_id)
    # Every broker's metadata names the replicas offline, moved or not.
    c.send_update_metadata(sorted(set(changed) | set(partitions)))


def elect_one(c: Controller, tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr:
    """A partition whose leader is gone: a clean (or, where the topic allows it, unclean)
    election, else offline (leader -1); an offline partition that still cannot be led
    keeps its state."""
    ctx = c.ctx
    try:
        new, unclean = election.offline_partition(
            ctx.replicas(tp), state, ctx.live, ctx.epoch, c.allows_unclean(tp[0])
        )
        if unclean:
            log.warning("%s-%d: unclean leader election of %d", *tp, new.leader)
        return new
    except election.NoEligibleLeader as exc:
        if state.leader < 0:
            return state
        log.warning("%s-%d is offline: %s", *tp, exc)
        return election.leader_lost(state, ctx.epoch)


async def elect_offline(c: Controller, partitions: Iterable[TopicPartition]) -> None:
    """Partitions with no live leader (or no state yet) get one where possible."""
    ctx = c.ctx
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
        new = elect_one(c, tp, state)
        return None if new == state else new

    await c.refresh_unclean(tp[0] for tp in existing if not ctx.is_live(ctx.states[tp].leader))
    changed = await c.apply(existing, decide, created)
    if changed or created:
        c.send_update_metadata(sorted({*changed, *created}))


def election_refused(ctx: ControllerContext, tp: TopicPartition, unclean: bool) -> ErrorCode | None:
    """Why an asked-for election of `tp` is not held (None: it is)."""
    state = ctx.states.get(tp)
    replicas = ctx.replicas(tp)
    if state is None or not replicas or tp[0] in ctx.deleting:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if unclean and ctx.is_live(state.leader):
        return ErrorCode.ELECTION_NOT_NEEDED
    if not unclean and state.leader == replicas[0]:
        return ErrorCode.ELECTION_NOT_NEEDED
    return None


async def elect_leaders(
    c: Controller, partitions: list[TopicPartition] | None, unclean: bool
) -> Results:
    """The preferred replica (or, `unclean`, any live replica of a partition without a
    leader) leads each partition asked for (None: every one). Raises NotController."""
    ctx = c.active_context()
    results: Results = {}
    eligible: list[TopicPartition] = []
    for tp in partitions if partitions is not None else sorted(ctx.states):
        refused = election_refused(ctx, tp, unclean)
        if refused is None:
            eligible.append(tp)
        else:
            results[tp] = (refused, None)

    def decide(tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr | None:
        if unclean:
            try:
                return election.offline_partition(
                    ctx.replicas(tp), state, ctx.live, ctx.epoch, unclean=True
                )[0]
            except election.NoEligibleLeader:
                return None
        return election.preferred_replica(ctx.replicas(tp), state, ctx.live, ctx.epoch)

    changed = await c.apply(eligible, decide)
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
        c.send_update_metadata(sorted(changed))
    return results


async def preferred_replica_election(c: Controller) -> None:
    """`/admin/preferred_replica_election` (Kafka's tool writes it): elect, then delete it."""
    if c.ctx is None:
        return
    asked = await c.store.read_preferred_election(c.watch(PreferredReplicaElection()))
    if asked is None:
        return
    results = await elect_leaders(c, asked, unclean=False)
    done = (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)
    failed = {tp: r for tp, r in results.items() if r[0] not in done}
    if failed:
        log.warning("preferred replica election: not done for %s", failed)
    await c.store.delete_preferred_election()


def imbalanced(ctx: ControllerContext, imbalance_percent: int) -> list[TopicPartition]:
    """Kafka's automatic rebalance: the partitions to give back to each broker whose
    share of the partitions it should lead (it is their first replica) but does not lead
    passes `imbalance_percent`."""
    moving: list[TopicPartition] = []
    for broker_id in sorted(ctx.live):
        if broker_id in ctx.shutting_down:
            continue
        preferred = [
            tp
            for tp in ctx.states
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
    return moving


async def check_imbalance(c: Controller, imbalance_percent: int) -> None:
    if c.ctx is None:
        return
    moving = imbalanced(c.ctx, imbalance_percent)
    if moving:
        await elect_leaders(c, sorted(moving), unclean=False)
