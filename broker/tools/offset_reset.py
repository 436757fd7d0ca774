"""--reset-offsets: new committed offsets for groups without members, planned from the
logs' offsets, printed, and committed with --execute.

Kafka's rules: only a group that is Empty (or Dead: it does not exist yet) can be reset,
since its members would overwrite the offsets; a requested offset outside the log is
clamped to the log start or end, with a warning; --shift-by needs a committed offset;
--to-datetime takes the first offset at or after the time, the log end if there is none.
"""

from __future__ import annotations

from typing import NamedTuple

from broker.tools.arguments import TopicSpec
from broker.tools.groups import GroupTool

RESETTABLE_STATES = ("Empty", "Dead")


class ResetRequest(NamedTuple):
    topics: list[TopicSpec] | None  # None: --all-topics (those the group has committed)
    scenario: str  # to_earliest, to_latest, to_offset, shift_by, to_datetime
    value: int | None  # the offset, shift or time (ms) the scenario takes
    execute: bool


def reset_offsets(tool: GroupTool, groups: list[str], request: ResetRequest) -> None:
    plans: dict[str, dict[tuple[str, int], int]] = {}
    for group_id, described in tool.admin.describe_groups(groups).items():
        if described.state not in RESETTABLE_STATES:
            tool.out.error(
                f"Assignments can only be reset if the group '{group_id}' is inactive, "
                f"but the current state is {described.state}."
            )
            continue
        plan = _plan(tool, group_id, request)
        if plan is None:
            continue
        if request.execute and plan:
            tool.admin.alter_group_offsets(group_id, plan, raise_errors=True)
        plans[group_id] = plan
    rows = [
        (group_id, topic, partition, offset)
        for group_id, plan in plans.items()
        for (topic, partition), offset in sorted(plan.items())
    ]
    if rows:
        tool.out.table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), rows, (30, 30, 10))


def _plan(tool: GroupTool, group_id: str, request: ResetRequest) -> dict | None:
    """(topic, partition) -> new offset, or None after reporting why there is none."""
    committed = {tp: c.offset for tp, c in tool.admin.list_group_offsets(group_id).items()}
    if request.topics is None:
        partitions = sorted(committed)
    else:
        partitions, missing = tool.partitions(request.topics)
        if missing:
            names = ", ".join(t if p < 0 else f"{t}-{p}" for t, p in missing)
            tool.out.error(f"Topic or partition does not exist: {names}")
            return None
    consumer = tool.consumer
    scenario, value = request.scenario, request.value
    if scenario == "to_earliest":
        return {tp: consumer.earliest_offset(*tp) for tp in partitions}
    if scenario == "to_latest":
        return {tp: consumer.latest_offset(*tp) for tp in partitions}
    if scenario == "to_datetime":
        plan = {}
        for tp in partitions:
            offset = consumer.offsets_before(*tp, value)
            plan[tp] = offset if offset >= 0 else consumer.latest_offset(*tp)
        return plan
    if scenario == "to_offset":
        return {tp: _within_log(tool, tp, value) for tp in partitions}
    uncommitted = [tp for tp in partitions if tp not in committed]
    if uncommitted:
        names = ", ".join(f"{t}-{p}" for t, p in uncommitted)
        tool.out.error(
            f"Cannot shift offset for partition {names} since there is no current committed offset"
        )
        return None
    return {tp: _within_log(tool, tp, committed[tp] + value) for tp in partitions}


def _within_log(tool: GroupTool, tp: tuple[str, int], offset: int) -> int:
    """`offset` clamped to [log start, log end], with Kafka's warnings."""
    name = f"{tp[0]}-{tp[1]}"
    end = tool.consumer.latest_offset(*tp)
    if offset > end:
        tool.out.warn(
            f"New offset ({offset}) is higher than latest offset for topic partition {name}. "
            f"Value will be set to {end}"
        )
        return end
    start = tool.consumer.earliest_offset(*tp)
    if offset < start:
        tool.out.warn(
            f"New offset ({offset}) is lower than earliest offset for topic partition {name}. "
            f"Value will be set to {start}"
        )
        return start
    return offset
