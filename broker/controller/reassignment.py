"""Partition reassignment, the checks and the arithmetic (docs/contracts/cluster.md,
"Reassignment"); the controller carries it out (broker/controller/controller.py).

A partition moves from its original replicas to a target list in Kafka's three steps:
the new replicas are added (the partition's replicas are then the target followed by
the leaving ones, its znode naming `adding_replicas` and `removing_replicas`), the
controller waits until every target replica is in the ISR, then moves leadership into
the target if needed, drops the leaving replicas from the ISR and the assignment, and
stops and deletes them. A cancelled move goes back to the original replicas the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from broker.cluster import LeaderAndIsr
from broker.zk.layout import Reassignment

__all__ = ["Reassignment", "target_problem", "is_complete", "redirect"]


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
