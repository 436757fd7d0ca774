"""The assignors, by the names every Kafka client uses; `partition.assignment.strategy`
lists them in order of preference."""

from __future__ import annotations

from broker.client.group.assignors.base import Assignor, RebalanceProtocol
from broker.client.group.assignors.range import RangeAssignor
from broker.client.group.assignors.roundrobin import RoundRobinAssignor
from broker.client.group.assignors.sticky import CooperativeStickyAssignor, StickyAssignor

ASSIGNORS: dict[str, type[Assignor]] = {
    a.name: a
    for a in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}


def make_assignors(names: list[str]) -> list[Assignor]:
    """Fresh assignors (they keep per-member state) for names; ValueError for an unknown one."""
    unknown = [n for n in names if n not in ASSIGNORS]
    if unknown:
        raise ValueError(f"unknown assignor {unknown[0]!r} (known: {', '.join(ASSIGNORS)})")
    return [ASSIGNORS[n]() for n in names]


def rebalance_protocol(assignors: list[Assignor]) -> RebalanceProtocol:
    """The protocol every configured assignor supports, cooperative if they all do (as
    Kafka's client decides). ValueError when they share none."""
    common = set(RebalanceProtocol)
    for assignor in assignors:
        common &= set(assignor.supported_protocols)
    if not common:
        raise ValueError(
            f"assignors {[a.name for a in assignors]} share no rebalance protocol: "
            "eager and cooperative-only assignors cannot be mixed"
        )
    return max(common)


__all__ = [
    "ASSIGNORS",
    "Assignor",
    "RebalanceProtocol",
    "make_assignors",
    "rebalance_protocol",
]
