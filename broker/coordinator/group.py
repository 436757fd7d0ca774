"""A consumer group as its coordinator sees it: members, generation, state, offsets.

The states and the moves between them are Kafka's (docs/contracts/consumer-groups.md):

    Empty --join--> PreparingRebalance --all joined--> CompletingRebalance
      ^                 ^      |                              |
      |                 |      +--everyone left--> Empty      | leader's SyncGroup stored
      |                 +----member joins/leaves/fails--------+-----> Stable
    (any) --group deleted, partition unloaded, offsets expired--> Dead

`TRANSITIONS` is that picture as a table: a move from a state not listed for the target
is a bug in the coordinator, raised at once rather than leaving a group half-changed.
Member metadata and assignments are bytes the broker keeps and relays without reading
them, except the topic list of consumer subscriptions (`subscribed_topics`), which offset
expiration and OffsetDelete need, as in Kafka.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.coordinator.offsets_topic import CommittedOffset
from broker.protocol.consumer_protocol import subscription_topics
from broker.protocol.types import DecodeError

if TYPE_CHECKING:
    from broker.coordinator.coordinator import Waiter

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
# target state -> the states a group may move to it from
TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    _S.PREPARING_REBALANCE: frozenset({_S.EMPTY, _S.STABLE, _S.COMPLETING_REBALANCE}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(RuntimeError):
    pass


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # in the member's order of preference
    assignment: bytes = b""
    # The JoinGroup / SyncGroup answer this member waits for, if any.
    join_waiter: Waiter | None = None
    sync_waiter: Waiter | None = None
    # Its session ends here unless it heartbeats (or joins, syncs, commits) before.
    session_deadline_ms: int = 0
    # Joined in the current rebalance for the first time.
    is_new: bool = False

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None


@dataclass(frozen=True)
class PendingOffset:
    """A transactional commit whose transaction has not ended: invisible to OffsetFetch."""

    committed: CommittedOffset
    batch_offset: int  # of its record in __consumer_offsets


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # group.instance.id -> the member id currently holding it
    static_members: dict[str, str] = field(default_factory=dict)
    # Member ids handed out with MEMBER_ID_REQUIRED, not yet used to join.
    pending_members: set[str] = field(default_factory=set)
    # A member joined while the first rebalance of an empty group waits for more.
    new_member_added: bool = False
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    # Where each committed offset's record is in __consumer_offsets (its batch's offset):
    # of two commits of a partition, the later record wins, whichever finishes first.
    offset_batches: dict[tuple[str, int], int] = field(default_factory=dict)
    # Transactional commits waiting for their transaction's marker: producer id ->
    # partition -> the commit (docs/contracts/consumer-groups.md, "Transactional offsets").
    pending_txn_offsets: dict[int, dict[tuple[str, int], PendingOffset]] = field(
        default_factory=dict
    )
    # Plain commits being written, per partition (OffsetFetch's require_stable).
    commits_in_flight: Counter[tuple[str, int]] = field(default_factory=Counter)

    # -- state --------------------------------------------------------------------------
    def transition(self, target: GroupState, now_ms: int) -> None:
        if self.state not in TRANSITIONS[target]:
            raise IllegalStateTransition(
                f"group {self.group_id}: {self.state.value} -> {target.value} is not a move "
                "a group can make"
            )
        self.state = target
        self.state_timestamp_ms = now_ms

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    # -- members ------------------------------------------------------------------------
    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """A static member came back under a new member id: it keeps its place."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A request naming a static instance under a member id that no longer holds it."""
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def has_all_members_joined(self) -> bool:
        return (
            all(m.join_waiter is not None for m in self.members.values())
            and not self.pending_members
        )

    def awaiting_join(self) -> list[Member]:
        return [m for m in self.members.values() if m.join_waiter is not None]

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.join_waiter is None]

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if none."""
        leader = self.members.get(self.leader_id) if self.leader_id else None
        if leader is not None and leader.join_waiter is not None:
            return True
        for member in self.members.values():
            if member.join_waiter is not None:
                self.leader_id = member.member_id
                return True
        return False

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols ------------------------------------------------------------------------
    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Can a member with these protocols join? A group with members needs the same
        protocol type and a protocol every member (and this one) lists."""
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        names = {name for name, _ in protocols}
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & names)

    def candidate_protocols(self) -> set[str]:
        common: set[str] | None = None
        for member in self.members.values():
            names = set(member.protocol_names())
            common = names if common is None else common & names
        return common or set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that every member lists; the
        most votes win (a tie goes to the first name in sorted order, so every coordinator
        decides the same way)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id} has no protocol every member supports")
        votes: Counter[str] = Counter()
        for member in self.members.values():
            votes[next(n for n in member.protocol_names() if n in candidates)] += 1
        most = max(votes.values())
        return min(name for name, count in votes.items() if count == most)

    # -- what consumers subscribe to -------------------------------------------------------
    def subscribed_topics(self) -> set[str] | None:
        """The topics the members of a consumer group subscribe to, read from their
        subscriptions in the chosen protocol; None when unknown (not a consumer group, no
        protocol chosen yet, or a subscription that does not decode)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics |= subscription_topics(member.metadata(self.protocol_name))
            except (KeyError, DecodeError):
                return None
        return topics

    # -- committed offsets --------------------------------------------------------------
    def store_offset(self, tp: tuple[str, int], committed: CommittedOffset, batch: int) -> bool:
        """Take a commit whose record is at `batch` unless a later record of the
        partition is already applied (commits finish out of order; the log decides)."""
        if tp in self.offsets and self.offset_batches.get(tp, -1) > batch:
            return False
        self.offsets[tp] = committed
        self.offset_batches[tp] = batch
        return True

    def has_pending_offset(self, tp: tuple[str, int]) -> bool:
        """A commit of the partition is being written, or waits for its transaction."""
        return self.commits_in_flight[tp] > 0 or any(
            tp in pending for pending in self.pending_txn_offsets.values()
        )

    def complete_txn_offsets(self, producer_id: int, committed: bool) -> int:
        """The producer's transaction ended: its pending commits become the committed
        offsets (COMMIT) or are dropped (ABORT). Returns how many were applied."""
        pending = self.pending_txn_offsets.pop(producer_id, {})
        if not committed:
            return 0
        return sum(self.store_offset(tp, p.committed, p.batch_offset) for tp, p in pending.items())
