"""Controlled shutdown (the ControlledShutdown request of a stopping broker): its
leaderships move to other in-sync replicas first, it leaves the ISRs, and it stops the
replicas that moved on without it; the answer lists what it still leads.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.cluster import LeaderAndIsr, TopicPartition
from broker.controller import election
from broker.controller.context import ControllerContext
from broker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.controller.controller import Controller

log = logging.getLogger(__name__)


async def controlled_shutdown(
    c: Controller, broker_id: int, broker_epoch: int
) -> tuple[ErrorCode, list[TopicPartition]]:
    ctx = c.ctx
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

    changed = await c.apply(mine, decide)
    # The stopping broker gets no LeaderAndIsr (it would follow, fetch, and be taken
    # back into the ISRs it is leaving): it stops every replica that moved on without
    # it, those it led answering NOT_LEADER_OR_FOLLOWER (retriable) from now on.
    moved = [tp for tp in changed if tp not in followed]
    c.send_stop_replica(broker_id, sorted({*followed, *moved}), delete=False)
    c.send_update_metadata(sorted(changed))
    remaining = still_led(ctx, broker_id)
    log.info(
        "controlled shutdown of broker %d: %d leaderships moved, %d remain",
        broker_id,
        len(moved),
        len(remaining),
    )
    return ErrorCode.NONE, remaining


def still_led(ctx: ControllerContext, broker_id: int) -> list[TopicPartition]:
    """What a stopping broker still leads and may hand over on a later try: partitions
    with another live replica (catching up). With no other replica alive, waiting cannot
    help."""
    return [
        tp
        for tp in ctx.partitions_on(broker_id)
        if ctx.states.get(tp) is not None
        and ctx.states[tp].leader == broker_id
        and any(
            r != broker_id and ctx.is_live(r) and r not in ctx.shutting_down
            for r in ctx.replicas(tp)
        )
    ]
