"""What a group's members did, read back from their event logs (`group_member.py`), and
the checks every group test makes of it:

- a partition is owned by one member at a time (ownership runs from an assignment to its
  revocation, the member's close or its kill);
- a member consumes a partition only while it owns it, in offset order, without gaps;
- an owner starts where the group's committed offset stood: never after the last record
  read before (nothing skipped), never before the last commit a previous owner saw
  succeed (nothing committed is read again);
- every produced record is consumed; the records consumed twice are returned, with who
  consumed them, for the test to account for exactly.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.cluster import wait_for


def read_events(path: Path) -> list[dict]:
    """A member's events so far; a last line cut short (a kill mid-write) is left out."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    events = []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            break  # only the last line can be torn
    return events


def assigned_now(events: list[dict]) -> set[int]:
    """The partitions a member owns after its last event."""
    owned: set[int] = set()
    for e in events:
        if e["ev"] == "assign":
            owned |= set(e["partitions"])
        elif e["ev"] == "revoke":
            owned -= set(e["partitions"])
        elif e["ev"] == "closed":
            owned = set()
    return owned


def membership_changes(events: list[dict]) -> list[str]:
    """The member's assignments, revocations and close, in order ("assign", "revoke",
    "closed"): after the group settled, ["revoke", "closed"] means no rebalance."""
    return [e["ev"] for e in events if e["ev"] in ("assign", "revoke", "closed")]


def member_ids(events: list[dict]) -> list[str]:
    """The member ids a member had, in order (one per assignment it got)."""
    return [e["member_id"] for e in events if e["ev"] == "assign"]


@dataclass
class Ownership:
    """One member owning one partition for a while, and what it did with it."""

    member: str
    partition: int
    start: float
    end: float = math.inf
    offsets: list[int] = field(default_factory=list)
    committed: int | None = None  # the last commit it saw succeed (the next offset)


def ownerships(logs: dict[str, list[dict]], ended: dict[str, float]) -> list[Ownership]:
    """Every ownership of every member; a member's open ones end at `ended[member]` (when
    it was killed) or stay open."""
    found: list[Ownership] = []
    for member, events in logs.items():
        open_: dict[int, Ownership] = {}
        for e in events:
            ev = e["ev"]
            if ev == "assign":  # partitions added (eager protocols revoke all first)
                for p in e["partitions"]:
                    assert p not in open_, f"{member}: assigned {p}, which it owns"
                    open_[p] = Ownership(member, p, e["t"])
            elif ev in ("revoke", "closed"):
                for p in e.get("partitions", list(open_)):
                    owned = open_.pop(p, None)
                    assert owned is not None, f"{member}: {p} revoked but not owned"
                    owned.end = e["t"]
                    found.append(owned)
            elif ev == "consumed":
                owned = open_.get(e["p"])
                assert owned is not None, f"{member} consumed {e['p']}/{e['o']} without owning it"
                owned.offsets.append(e["o"])
            elif ev == "committed":
                for p, o in e["offsets"].items():
                    owned = open_.get(int(p))
                    assert owned is not None, f"{member} committed {p} without owning it"
                    owned.committed = o
        for owned in open_.values():
            owned.end = ended.get(member, math.inf)
            found.append(owned)
    return found


def check_history(
    logs: dict[str, list[dict]], produced: set[tuple[int, int]], ended: dict[str, float]
) -> dict[tuple[int, int], list[str]]:
    """Check the members' logs against the rules above; `produced` is every (partition,
    offset) written. Returns the records consumed more than once, with their consumers in
    order."""
    by_partition: dict[int, list[Ownership]] = defaultdict(list)
    for owned in ownerships(logs, ended):
        by_partition[owned.partition].append(owned)
    consumed: dict[tuple[int, int], list[str]] = defaultdict(list)
    for p, owned_list in sorted(by_partition.items()):
        owned_list.sort(key=lambda o: o.start)
        read_to, commit_floor, previous = 0, 0, None
        for owned in owned_list:
            if previous is not None:
                assert owned.start >= previous.end, (
                    f"partition {p} owned by {previous.member} and {owned.member} at once"
                )
            offsets = owned.offsets
            if offsets:
                assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), (
                    f"{owned.member} read partition {p} out of order or with gaps: {offsets}"
                )
                assert offsets[0] <= read_to, (
                    f"{owned.member} started partition {p} at {offsets[0]}: "
                    f"offsets {read_to}..{offsets[0] - 1} skipped"
                )
                assert offsets[0] >= commit_floor, (
                    f"{owned.member} started partition {p} at {offsets[0]}, before the "
                    f"commit of {commit_floor} a previous owner saw succeed"
                )
                read_to = max(read_to, offsets[-1] + 1)
                for o in offsets:
                    consumed[(p, o)].append(owned.member)
            if owned.committed is not None:
                commit_floor = max(commit_floor, owned.committed)
            previous = owned
    missing = produced - set(consumed)
    assert not missing, f"{len(missing)} records never consumed, e.g. {sorted(missing)[:5]}"
    foreign = set(consumed) - produced
    assert not foreign, f"consumed records nobody produced: {sorted(foreign)[:5]}"
    return {key: who for key, who in consumed.items() if len(who) > 1}


# -- waiting on running members (anything with `.spec.events` and `.spec.name`) ---------------


def owners(members) -> dict[str, set[int]]:
    """member name -> the partitions it owns now."""
    return {m.spec.name: assigned_now(read_events(m.spec.events)) for m in members}


def wait_assigned(members, partitions: int, what: str) -> dict[str, set[int]]:
    """Until `members` between them own every one of `partitions`, each some, none twice;
    returns `owners`."""

    def split():
        found = owners(members)
        owned = [p for parts in found.values() for p in parts]
        return found if sorted(owned) == list(range(partitions)) and all(found.values()) else None

    return wait_for(split, what)


def consumed_to(members) -> dict[int, int]:
    """partition -> the highest offset any of `members` consumed."""
    seen: dict[int, int] = {}
    for m in members:
        for e in read_events(m.spec.events):
            if e["ev"] == "consumed":
                seen[e["p"]] = max(seen.get(e["p"], -1), e["o"])
    return seen


def wait_consumed_past(members, positions: dict[int, int], what: str) -> None:
    """Until `members` have consumed past `positions` (partition -> offset)."""

    def done():
        seen = consumed_to(members)
        return all(seen.get(p, -1) > o for p, o in positions.items())

    wait_for(done, what)
