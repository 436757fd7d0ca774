"""Partition reassignment (docs/contracts/cluster.md, "Reassignment"): the checks and
the arithmetic as pure functions, then the controller's steps (AlterPartitionReassignments
and `/admin/reassign_partitions` events, and the ISR changes that complete a move).

A partition moves from its original replicas to a target list in Kafka's three steps:
the new replicas are added (the partition's replicas are then the target followed by
the leaving ones, its znode naming `adding_replicas` and `removing_replicas`), the
controller waits until every target replica is in the ISR, then moves leadership into
the target if needed, drops the leaving replicas from the ISR and the assignment, and
stops and deletes them. A cancelled move goes back to the original replicas the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING

from broker.cluster import LeaderAndIsr, TopicPartition
from broker.controller import election
from broker.controller.context import ControllerContext
from broker.controller.events import ZkPartitionReassignment
from broker.protocol.errors import ErrorCode
from broker.zk.layout import Reassignment

if TYPE_CHECKING:
    from broker.controller.controller import Controller

log = logging.getLogger(__name__)

Results = dict[TopicPartition, tuple[ErrorCode, str | None]]


# -- the checks and the arithmetic ------------------------------------------------------------
def target_problem(target: Sequence[int], brokers: Collection[int]) -> str | None:
    """What is wrong with a target replica list, given the registered brokers, or None."""
    if not target:
        return "Empty replica list specified in partition reassignment."
    duplicates = sorted({r for r in target if list(target).count(r) > 1})
    if duplicates:
        return f"Duplicate replica ids in partition reassignment replica list: {duplicates}."
    unknown = sorted(set(target) - set(brokers))
    if unknown:
        return (
            f"The proposed assignment contains non-existent brokers {unknown} "
            f"(registered: {sorted(brokers)})."
        )
    return None


def is_complete(moving: Reassignment, state: LeaderAndIsr | None) -> bool:
    """Every target replica has caught up (is in the ISR)."""
    return state is not None and set(moving.target) <= set(state.isr)


def redirect(
    replicas: list[int], ongoing: Reassignment | None, target: Sequence[int]
) -> Reassignment:
    """The move to `target` of a partition whose replicas are `replicas`: from its original
    replicas, also when a move was already under way (its new replicas not in `target`
    are dropped again)."""
    original = ongoing.original if ongoing is not None else replicas
    return Reassignment.between(list(original), list(target))


def under_way(ctx: ControllerContext, partitions: Iterable[TopicPartition] | None) -> dict:
    """ListPartitionReassignments: the moves under way (all, or of `partitions`), each as
    (replicas, adding, removing)."""
    wanted = ctx.reassigning if partitions is None else partitions
    return {
        tp: (ctx.replicas(tp), list(m.adding), list(m.removing))
        for tp in sorted(wanted)
        if (m := ctx.reassigning.get(tp)) is not None
    }


# -- the controller's steps ---------------------------------------------------------------------
async def alter(c: Controller, asked: dict[TopicPartition, list[int] | None]) -> Results:
    """Move each partition to its target (None: cancel its move). Checked per partition;
    one refused changes nothing of its own. The accepted moves start together (a write of
    each topic's assignment, one of the partitions' states). Raises NotController."""
    ctx = c.active_context()
    results: Results = {}
    targets: dict[TopicPartition, list[int]] = {}
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
            problem = target_problem(target, ctx.live)
            if problem is not None:
                results[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
                continue
        targets[tp] = list(target)
        results[tp] = (ErrorCode.NONE, None)
    await _move(c, targets)
    return results


async def _move(c: Controller, targets: dict[TopicPartition, list[int]]) -> None:
    """Start (or redirect) the move of each partition to its target: its replicas become
    the target followed by the leaving ones, under a new leader epoch; replicas an
    earlier target added and this one does not want are stopped again. A move back to
    the original replicas is a cancellation: finished at once."""
    ctx = c.ctx
    starting: dict[TopicPartition, tuple[Reassignment, list[int]]] = {}
    cancelled: dict[TopicPartition, list[int]] = {}
    for tp, target in targets.items():
        before = ctx.replicas(tp)
        ongoing = ctx.reassigning.get(tp)
        moving = redirect(before, ongoing, target)
        if ongoing == moving:
            continue  # asked again (e.g. /admin/reassign_partitions rewritten): under way
        if not moving.adding and not moving.removing:
            if ongoing is not None or before != target:
                cancelled[tp] = target  # back to the original
            continue
        starting[tp] = moving, [r for r in before if r not in moving.replicas]
    if cancelled:
        await _finish_moves(c, cancelled)
    if not starting:
        return
    for tp, (moving, _) in starting.items():
        ctx.assignments[tp[0]][tp[1]] = moving.replicas
        ctx.reassigning[tp] = moving
        log.info(
            "%s-%d: reassigning %s -> %s (adding %s, removing %s)",
            *tp,
            moving.original,
            list(moving.target),
            list(moving.adding),
            list(moving.removing),
        )
    await _write_assignments(c, starting)

    def decide(tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr | None:
        moving, dropped = starting[tp]
        return election.replicas_moved(moving.replicas, dropped, state, ctx.live, ctx.epoch)

    await c.apply(sorted(starting), decide)
    c.send_update_metadata(sorted(starting))
    _stop_moved_replicas(c, {tp: dropped for tp, (_, dropped) in starting.items()})
    await finish_moves(c, sorted(starting))


async def finish_moves(c: Controller, partitions: Iterable[TopicPartition]) -> None:
    """Finish the moves of `partitions` whose target replicas have all caught up."""
    ctx = c.ctx
    complete = {
        tp: list(moving.target)
        for tp in partitions
        if (moving := ctx.reassigning.get(tp)) is not None
        and is_complete(moving, ctx.states.get(tp))
    }
    if complete:
        await _finish_moves(c, complete)


async def _finish_moves(c: Controller, targets: dict[TopicPartition, list[int]]) -> None:
    """Each partition's replicas become its target: leadership and ISR first (a controller
    taking over after this still sees the move in the assignment znode and finishes it),
    then the assignments, then the leaving replicas are deleted."""
    ctx = c.ctx
    leaving = {
        tp: [r for r in ctx.replicas(tp) if r not in target] for tp, target in targets.items()
    }
    for tp, target in targets.items():
        ctx.assignments[tp[0]][tp[1]] = target
        ctx.reassigning.pop(tp, None)

    def decide(tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr | None:
        return election.replicas_moved(targets[tp], leaving[tp], state, ctx.live, ctx.epoch)

    await c.apply(sorted(targets), decide)
    await _write_assignments(c, targets)
    c.send_update_metadata(sorted(targets))
    _stop_moved_replicas(c, leaving)
    for tp, target in sorted(targets.items()):
        log.info("%s-%d: reassignment done, replicas %s", *tp, target)
    await c.store.keep_reassign_requests(ctx.reassigning)


def _stop_moved_replicas(c: Controller, leaving: dict[TopicPartition, list[int]]) -> None:
    """One deleting StopReplica per broker for the replicas it no longer holds. A broker
    that is down keeps its copy on disk; nothing leads it there again."""
    by_broker: dict[int, list[TopicPartition]] = {}
    for tp, brokers in sorted(leaving.items()):
        for broker_id in brokers:
            by_broker.setdefault(broker_id, []).append(tp)
    for broker_id, partitions in sorted(by_broker.items()):
        c.send_stop_replica(broker_id, partitions, delete=True)


async def _write_assignments(c: Controller, partitions: Iterable[TopicPartition]) -> None:
    """The assignment znodes of the partitions' topics as the controller knows them,
    fenced by its epoch: one write per topic."""
    ctx = c.ctx
    for topic in sorted({tp[0] for tp in partitions}):
        moving = {p: r for (t, p), r in ctx.reassigning.items() if t == topic}
        await c.store.write_assignment(topic, ctx.assignments[topic], moving, ctx.epoch_zk_version)


async def zk_requested(c: Controller) -> None:
    """`/admin/reassign_partitions` (Kafka's reassignment tool writes it): start each
    move; the znode keeps the moves under way and goes when they are all done."""
    if c.ctx is None:
        return
    asked = await c.store.read_reassign_request(c.watch(ZkPartitionReassignment()))
    if asked is None:
        return
    results = await alter(c, asked)
    for tp, (code, message) in results.items():
        if code != ErrorCode.NONE:
            log.warning("reassignment of %s-%d refused: %s", *tp, message or code.name)
    await c.store.keep_reassign_requests(c.ctx.reassigning)
