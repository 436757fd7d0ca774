"""Whether a group takes an OffsetCommit, as Kafka's classic group coordinator decides it:
a pure function of the group (its state, members, generation, static ids) and the
request's generation, member id and group instance id. No I/O, no clock.

The decision is made in two steps, in Kafka's order (docs/contracts/consumer-groups.md,
"Offset commits, state by state"):

1. Who commits (`_identity_error`): a commit with generation -1 to an Empty group is a
   standalone one (assign-mode consumers, the admin client) and needs no member. Any
   commit naming a generation, a member id or an instance id must come from the current
   member holding that id (static ids first: an unknown instance is UNKNOWN_MEMBER_ID,
   one held by another member id FENCED_INSTANCE_ID) at the current generation, else
   ILLEGAL_GENERATION. An anonymous commit to a group with members is UNKNOWN_MEMBER_ID.
2. What the state allows (`BY_STATE`, one row per state) for a commit that passed step 1.

The order matters for members caught by a rebalance: a commit of the generation before
is ILLEGAL_GENERATION in every state, also while the group completes its rebalance
(checking the state first answered REBALANCE_IN_PROGRESS there). A commit of the current
generation is taken while the group prepares a rebalance (KIP-429: cooperative members
keep their partitions and commit them until they give them up); only between the joins'
answers and the stored assignment (CompletingRebalance), where a member of the current
generation cannot have consumed anything of it yet, it is REBALANCE_IN_PROGRESS.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.coordinator.group import Group, GroupState
from broker.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState


@dataclass(frozen=True)
class Accept:
    """Store the offsets (creating the group, Empty, if it does not exist yet).
    `heartbeat`: the commit restarts the member's session, as a Heartbeat would."""

    heartbeat: bool


# A commit that passed the identity checks, by the group's state.
BY_STATE: dict[GroupState, Accept | ErrorCode] = {
    S.EMPTY: Accept(heartbeat=False),  # standalone commits: there is no member to keep
    S.PREPARING_REBALANCE: Accept(heartbeat=True),
    S.COMPLETING_REBALANCE: E.REBALANCE_IN_PROGRESS,
    S.STABLE: Accept(heartbeat=True),
    # Checked before who commits: a Dead group (deleted, unloaded) takes nothing; the
    # client looks the coordinator up again.
    S.DEAD: E.COORDINATOR_NOT_AVAILABLE,
}


def decide_offset_commit(
    group: Group | None, generation_id: int, member_id: str, instance_id: str | None
) -> Accept | ErrorCode:
    """The group's answer to an OffsetCommit: `Accept`, or the error for every partition."""
    if group is None:
        # Generation -1: a standalone consumer's first commit creates its group. Any
        # other generation belongs to a group this coordinator does not have (OffsetCommit
        # v9+ would answer GROUP_ID_NOT_FOUND; we serve up to v8).
        return Accept(heartbeat=False) if generation_id < 0 else E.ILLEGAL_GENERATION
    if group.is_(S.DEAD):
        return BY_STATE[S.DEAD]
    error = _identity_error(group, generation_id, member_id, instance_id)
    if error is not None:
        return error
    return BY_STATE[group.state]


def decide_txn_offset_commit(
    group: Group, generation_id: int, member_id: str, instance_id: str | None
) -> ErrorCode | None:
    """The group's answer to a TxnOffsetCommit (None: store the offsets as pending), as
    Kafka's ZooKeeper-era coordinator decides it: the same identity checks when the
    request names a member (v3+), no check without one (v0-v2 carry none: the
    producer's epoch fences zombies instead), and no state row: the transaction, not
    the rebalance, decides when the offsets count."""
    if group.is_(S.DEAD):
        return BY_STATE[S.DEAD]
    if generation_id < 0 and not member_id and instance_id is None:
        return None
    return _identity_error(group, generation_id, member_id, instance_id)


def _identity_error(
    group: Group, generation_id: int, member_id: str, instance_id: str | None
) -> ErrorCode | None:
    if generation_id < 0 and group.is_(S.EMPTY):
        return None  # standalone: whatever ids it names, an Empty group has no member
    if generation_id >= 0 or member_id or instance_id is not None:
        if instance_id is not None:
            holder = group.static_members.get(instance_id)
            if holder is None:
                return E.UNKNOWN_MEMBER_ID
            if holder != member_id:
                return E.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return E.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        return None
    # Generation -1, no member id, no instance id, and the group has members.
    return E.UNKNOWN_MEMBER_ID
