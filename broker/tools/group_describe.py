"""--describe: a group's committed offsets and lag per partition (the default view),
its members (--members, with --verbose their assignments) or its state (--state), as
Kafka's tool prints them.

Offsets view: a row per partition a member is assigned (members with the most
partitions first) and per partition the group has committed that no member is
assigned (CONSUMER-ID, HOST and CLIENT-ID "-"). CURRENT-OFFSET is the committed offset,
LOG-END-OFFSET the high watermark, LAG their difference; "-" where one is not known.
"""

from __future__ import annotations

from broker.client.admin import CONSUMER_PROTOCOL_TYPE, GroupDescription, MemberDescription
from broker.tools.groups import GroupTool
from broker.tools.output import MISSING

REBALANCING = ("PreparingRebalance", "CompletingRebalance")


def describe(tool: GroupTool, groups: list[str], view: str, verbose: bool) -> None:
    """`view`: "offsets", "members" or "state"."""
    descriptions = tool.admin.describe_groups(groups)
    for group_id in sorted(descriptions):
        described = descriptions[group_id]
        if described.protocol_type not in (CONSUMER_PROTOCOL_TYPE, ""):
            tool.out.error(
                f"Group '{group_id}' is not a consumer group "
                f"(protocol type {described.protocol_type})."
            )
        elif view == "state":
            _print_state(tool, described)
        elif view == "members":
            _print_members(tool, described, verbose)
        else:
            _print_offsets(tool, described)


def _announce(tool: GroupTool, described: GroupDescription, rows: int) -> bool:
    """Kafka's remarks on the group's state; whether there is a table to print."""
    group_id, state = described.group_id, described.state
    if state == "Dead":
        tool.out.error(f"Consumer group '{group_id}' does not exist.")
        return False
    if state == "Empty":
        tool.out.note(f"\nConsumer group '{group_id}' has no active members.")
    elif state in REBALANCING:
        tool.out.note(f"\nWarning: Consumer group '{group_id}' is rebalancing.")
    return rows > 0


def _print_offsets(tool: GroupTool, described: GroupDescription) -> None:
    group_id = described.group_id
    committed = tool.admin.list_group_offsets(group_id)
    owners: list[tuple[tuple[str, int], MemberDescription | None]] = []
    for member in sorted(described.members, key=lambda m: -len(m.assignment or ())):
        owners += [(tp, member) for tp in sorted(member.assignment or ())]
    assigned = {tp for tp, _ in owners}
    owners += [(tp, None) for tp in sorted(committed) if tp not in assigned]
    if not _announce(tool, described, len(owners)):
        return
    ends = tool.log_end_offsets([tp for tp, _ in owners])
    rows = []
    for (topic, partition), member in owners:
        current = committed[(topic, partition)].offset if (topic, partition) in committed else None
        end = ends[(topic, partition)]
        lag = end - current if current is not None and end is not None else None
        who = (member.member_id, member.host, member.client_id) if member else (MISSING,) * 3
        rows.append((group_id, topic, partition, current, end, lag, *who))
    header = (
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    )
    tool.out.table(header, rows, (15, 15, 10, 15, 15, 15, 15, 15))


def _print_members(tool: GroupTool, described: GroupDescription, verbose: bool) -> None:
    members = described.members
    if not _announce(tool, described, len(members)):
        return
    static = any(m.group_instance_id for m in members)
    header = ["GROUP", "CONSUMER-ID"] + ["GROUP-INSTANCE-ID"] * static
    header += ["HOST", "CLIENT-ID", "#PARTITIONS"] + ["ASSIGNMENT"] * verbose
    rows = []
    for m in members:
        row = [described.group_id, m.member_id] + [m.group_instance_id or ""] * static
        row += [m.host, m.client_id, len(m.assignment) if m.assignment is not None else None]
        if verbose:
            row.append(_assignment_text(m.assignment))
        rows.append(row)
    widths = [15, 15] + [17] * static + [15, 15] + [15] * verbose
    tool.out.table(header, rows, widths)


def _assignment_text(assignment: list[tuple[str, int]] | None) -> str:
    """Kafka's `topic(0,1), other(2)`, topics sorted; "-" for none."""
    if not assignment:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for topic, partition in assignment:
        by_topic.setdefault(topic, []).append(partition)
    return ", ".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items()))


def _print_state(tool: GroupTool, described: GroupDescription) -> None:
    if not _announce(tool, described, 1):
        return
    c = described.coordinator
    row = (
        described.group_id,
        f"{c.host}:{c.port} ({c.node_id})",
        described.protocol,
        described.state,
        len(described.members),
    )
    header = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
    tool.out.table(header, [row], (25, 25, 20, 15))
