"""How the controller picks a partition's leader and ISR: pure functions, one per case,
as Kafka's ZooKeeper-era controller decides (docs/contracts/cluster.md, "Replication").

Every new decision bumps the leader epoch, so brokers and clients can tell it from any
older one; a partition whose leader cannot be chosen keeps its state (it is offline: its
leader is not a live broker) until a replica comes back.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from broker.cluster import NO_LEADER, LeaderAndIsr


class NoEligibleLeader(Exception):
    """No replica may lead: the partition stays offline."""


def new_partition(
    replicas: Sequence[int], live: Collection[int], controller_epoch: int
) -> LeaderAndIsr:
    """A new partition: the first live replica leads, every live replica is in sync."""
    alive = [r for r in replicas if r in live]
    if not alive:
        raise NoEligibleLeader(f"no replica of {list(replicas)} is alive")
    return LeaderAndIsr(alive[0], 0, tuple(alive), controller_epoch)


def offline_partition(
    replicas: Sequence[int],
    current: LeaderAndIsr,
    live: Collection[int],
    controller_epoch: int,
    unclean: bool,
) -> tuple[LeaderAndIsr, bool]:
    """The leader is gone: the first live replica (in assignment order, so the preferred
    leader wins when it can) that is in the ISR. With no such replica, the first live one
    at all if `unclean` (acknowledged writes may be lost), else NoEligibleLeader.
    Returns the state and whether the election was unclean."""
    live_isr = [r for r in replicas if r in live and r in current.isr]
    if live_isr:
        return _next(current, live_isr[0], live_isr, controller_epoch), False
    if unclean:
        alive = [r for r in replicas if r in live]
        if alive:
            return _next(current, alive[0], [alive[0]], controller_epoch), True
    raise NoEligibleLeader(
        f"no live replica in the ISR {list(current.isr)} (live brokers {sorted(live)})"
    )


def controlled_shutdown(
    replicas: Sequence[int],
    current: LeaderAndIsr,
    live: Collection[int],
    shutting_down: Collection[int],
    controller_epoch: int,
) -> LeaderAndIsr:
    """The leader is stopping: another live ISR member that is not stopping leads, and the
    stopping brokers leave the ISR."""
    isr = [r for r in current.isr if r in live and r not in shutting_down]
    candidates = [r for r in replicas if r in isr]
    if not candidates:
        raise NoEligibleLeader(f"no other live replica in the ISR {list(current.isr)}")
    return _next(current, candidates[0], isr, controller_epoch)


def without_replicas(
    current: LeaderAndIsr, gone: Collection[int], controller_epoch: int
) -> LeaderAndIsr | None:
    """Followers that died or are stopping leave the ISR (the leader stays); None when
    none of them is in it. The ISR never becomes empty: a leader alone keeps itself."""
    isr = [r for r in current.isr if r not in gone]
    if len(isr) == len(current.isr):
        return None
    if not isr:
        isr = [current.leader] if current.leader in current.isr else list(current.isr[:1])
        if len(isr) == len(current.isr):
            return None
    return _next(current, current.leader, isr, controller_epoch)


def replica_offline(
    replicas: Sequence[int],
    current: LeaderAndIsr,
    offline: int,
    live: Collection[int],
    controller_epoch: int,
    unclean: bool,
) -> LeaderAndIsr | None:
    """`offline`'s replica is in a failed log dir (its broker lives on): as if that
    broker were gone for this partition alone. Leader: the next in-sync replica leads
    (or the partition goes offline, leader -1); follower: it leaves the ISR. None when
    it is neither."""
    others = [b for b in live if b != offline]
    if current.leader == offline:
        try:
            return offline_partition(replicas, current, others, controller_epoch, unclean)[0]
        except NoEligibleLeader:
            return leader_lost(current, controller_epoch)
    return without_replicas(current, {offline}, controller_epoch)


def leader_lost(current: LeaderAndIsr, controller_epoch: int) -> LeaderAndIsr:
    """No replica may lead: the partition is offline with leader -1, and its ISR keeps the
    replicas that had everything, so one of them can lead cleanly when it returns."""
    return LeaderAndIsr(
        NO_LEADER, current.leader_epoch + 1, current.isr, controller_epoch, current.zk_version
    )


def preferred_replica(
    replicas: Sequence[int], current: LeaderAndIsr, live: Collection[int], controller_epoch: int
) -> LeaderAndIsr | None:
    """Leadership back to the first replica of the assignment when it is live and in sync;
    None when it already leads or cannot."""
    preferred = replicas[0]
    if current.leader == preferred or preferred not in live or preferred not in current.isr:
        return None
    return _next(current, preferred, list(current.isr), controller_epoch)


def _next(
    current: LeaderAndIsr, leader: int, isr: Sequence[int], controller_epoch: int
) -> LeaderAndIsr:
    return LeaderAndIsr(
        leader, current.leader_epoch + 1, tuple(isr), controller_epoch, current.zk_version
    )


def replicas_moved(
    replicas: Sequence[int],
    leaving: Collection[int],
    current: LeaderAndIsr,
    live: Collection[int],
    controller_epoch: int,
) -> LeaderAndIsr:
    """The partition's replicas became `replicas` (a reassignment started, was redirected,
    finished or was cancelled): the `leaving` ones drop out of the ISR, the leader stays
    when it is still a live replica, else the first live, in-sync one of `replicas` leads
    (none: the partition is offline until one returns). A new leader epoch either way, so
    every replica takes the new replica list."""
    isr = [r for r in current.isr if r not in leaving]
    if current.leader in replicas and current.leader in live:
        leader = current.leader
    else:
        candidates = [r for r in replicas if r in live and r in isr]
        leader = candidates[0] if candidates else NO_LEADER
    return _next(current, leader, isr or list(current.isr[:1]), controller_epoch)
