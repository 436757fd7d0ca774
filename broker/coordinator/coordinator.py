"""The group coordinator: Kafka's classic group protocol, as functions of requests, state
and the clock.

Members find the coordinator (the leader of their group's offsets partition), join,
wait until every member has joined, get the generation's member list (the leader) or
nothing (the others), send SyncGroup (the leader with everyone's assignment), get their
assignment, then heartbeat; a join, a leave or a failed session starts the next
rebalance. The broker relays the members' metadata and the leader's assignments as bytes
(docs/contracts/consumer-groups.md).

Nothing here does I/O. Answers that must wait (a JoinGroup until the others have
joined, a SyncGroup until the leader's assignment is stored) are `Waiter`s the handlers
return as delayed responses; the group's own timers are operations in two purgatories:
`rebalances` (a rebalance completes when all members rejoined or at its timeout; the
first one of an empty group waits `group.initial.rebalance.delay.ms` for more members)
and `sessions` (a member whose session ends without a heartbeat is removed). Records go
to __consumer_offsets through the GroupMetadataManager, whose callbacks finish the work
once the replicas have them.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.coordinator.commit_rules import decide_offset_commit, decide_txn_offset_commit
from broker.coordinator.group import (
    CONSUMER_PROTOCOL_TYPE,
    Group,
    GroupState,
    Member,
    PendingOffset,
)
from broker.coordinator.manager import GroupMetadataManager
from broker.coordinator.offsets_topic import CommittedOffset
from broker.protocol.errors import ErrorCode
from broker.util.purgatory import DelayedOperation, Purgatory

log = logging.getLogger(__name__)

E = ErrorCode
S = GroupState
NEVER = 2**63 - 1
# ConsumerProtocolAssignment v0 with no partitions and null user data.
EMPTY_CONSUMER_ASSIGNMENT = bytes.fromhex("000000000000ffffffff")


class Waiter(DelayedOperation):
    """An answer a member waits for until the group decides (JoinGroup, SyncGroup, and
    offset commits waiting for their records to be replicated). It has no deadline of its
    own: the group's timers decide for it."""

    def __init__(self) -> None:
        super().__init__(NEVER, ())

    def try_complete(self, now_ms: int) -> bool:
        return self.completed

    def on_expiration(self, now_ms: int):
        raise RuntimeError("a waiter has no deadline")


@dataclass
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    # (member id, group instance id, metadata) of every member, for the leader only.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    # JoinGroup v4+ without an instance id first gets a member id (KIP-394).
    require_known_member_id: bool


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    # The largest record __consumer_offsets takes (message.max.bytes).
    max_record_bytes: int = 1048588

    @classmethod
    def from_broker_config(cls, cfg) -> GroupConfig:
        return cls(
            cfg["group.min.session.timeout.ms"],
            cfg["group.max.session.timeout.ms"],
            cfg["group.initial.rebalance.delay.ms"],
            cfg["group.max.size"],
            cfg["offset.metadata.max.bytes"],
            cfg["offsets.retention.minutes"] * 60 * 1000,
            cfg["message.max.bytes"],
        )


class GroupCoordinator:
    def __init__(
        self,
        manager: GroupMetadataManager,
        config: GroupConfig,
        now_ms: Callable[[], int],
        topic_exists: Callable[[str, int], bool] = lambda topic, partition: True,
    ) -> None:
        self.manager = manager
        self.config = config
        self.now_ms = now_ms
        self.topic_exists = topic_exists
        self.rebalances = Purgatory("Rebalance")
        self.sessions = Purgatory("Heartbeat")
        # Told of each rebalance started and each batch of offsets stored (metrics).
        self.on_rebalance: Callable[[], None] = lambda: None
        self.on_offsets_stored: Callable[[int], None] = lambda count: None
        manager.on_loaded = self._group_loaded
        manager.on_unloaded = self._group_unloaded

    def purgatories(self) -> list[Purgatory]:
        return [self.rebalances, self.sessions]

    # -- JoinGroup ------------------------------------------------------------------------
    def join_group(self, req: JoinRequest) -> JoinResult | Waiter:
        def fail(code: ErrorCode, member_id: str = req.member_id) -> JoinResult:
            return JoinResult(code, member_id)

        error = self._group_error(req.group_id)
        if error != E.NONE:
            return fail(error)
        if not (
            self.config.min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return fail(E.INVALID_SESSION_TIMEOUT)
        group = self.manager.get(req.group_id)
        if group is None:
            if req.member_id:
                # A member id the coordinator never gave (or a group since removed).
                return fail(E.UNKNOWN_MEMBER_ID)
            group = self.manager.add(Group(req.group_id, state_timestamp_ms=self.now_ms()))
        if group.is_(S.DEAD):
            # Removed meanwhile (deleted, or its partition moved): let the member find
            # the coordinator again.
            return fail(E.COORDINATOR_NOT_AVAILABLE)
        if not group.supports(req.protocol_type, req.protocols):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        if self._group_record_too_large(group, req):
            return fail(E.MESSAGE_TOO_LARGE)
        known = req.member_id in group.members or req.member_id in group.pending_members
        static_known = (
            req.group_instance_id is not None and req.group_instance_id in group.static_members
        )
        if not known and not static_known and len(group.members) >= self.config.max_size:
            return fail(E.GROUP_MAX_SIZE_REACHED)
        if not req.member_id:
            result = self._join_unknown_member(group, req)
        else:
            result = self._join_known_member(group, req)
        if group.is_(S.PREPARING_REBALANCE):
            self.rebalances.check_and_complete(("join", group.group_id), self.now_ms())
        return result

    def _group_record_too_large(self, group: Group, req: JoinRequest) -> bool:
        """Would the group's record (every member's subscription and assignment) outgrow
        what __consumer_offsets accepts with this member in it? Refused at the join, so
        one oversized subscription cannot keep the whole group failing its syncs."""
        per_member_overhead = 256  # ids, client id and host, timeouts
        size = max(len(metadata) for _, metadata in req.protocols) + per_member_overhead
        for member in group.members.values():
            if member.member_id != req.member_id:
                size += max(len(m) for _, m in member.protocols) + len(member.assignment)
                size += per_member_overhead
        return size > self.config.max_record_bytes

    def _join_unknown_member(self, group: Group, req: JoinRequest) -> JoinResult | Waiter:
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        new_id = f"{prefix}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            old_id = group.static_members.get(req.group_instance_id)
            if old_id is not None:
                return self._replace_static_member(group, req, old_id, new_id)
            return self._add_member_and_rebalance(group, req, new_id)
        if req.require_known_member_id:
            # KIP-394: hand out the id first, so a client that times out and retries
            # does not leave a ghost member behind that the group waits for.
            group.pending_members.add(new_id)
            self._schedule_session(group, new_id, req.session_timeout_ms, pending=True)
            return JoinResult(E.MEMBER_ID_REQUIRED, new_id)
        return self._add_member_and_rebalance(group, req, new_id)

    def _join_known_member(self, group: Group, req: JoinRequest) -> JoinResult | Waiter:
        if req.member_id in group.pending_members:
            group.pending_members.discard(req.member_id)
            return self._add_member_and_rebalance(group, req, req.member_id)
        if group.is_static_member_fenced(req.member_id, req.group_instance_id):
            return JoinResult(E.FENCED_INSTANCE_ID, req.member_id)
        member = group.members.get(req.member_id)
        if member is None:
            return JoinResult(E.UNKNOWN_MEMBER_ID, req.member_id)
        if group.is_(S.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(group, member, req)
        if group.is_(S.COMPLETING_REBALANCE):
            if member.same_protocols(req.protocols):
                # The member missed the join answer (a timeout, a reconnect): send it the
                # generation again.
                return self._join_result(group, member)
            return self._update_member_and_rebalance(group, member, req)
        if group.is_(S.STABLE):
            if member.member_id == group.leader_id or not member.same_protocols(req.protocols):
                # The leader rejoining wants new metadata, or the subscription changed.
                return self._update_member_and_rebalance(group, member, req)
            # A follower with nothing new: it may go straight to SyncGroup.
            self._heartbeat(group, member)
            return self._join_result(group, member)
        return JoinResult(E.UNKNOWN_MEMBER_ID, req.member_id)  # Empty (or Dead) has no members

    def _add_member_and_rebalance(self, group: Group, req: JoinRequest, member_id: str) -> Waiter:
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=list(req.protocols),
            is_new=True,
        )
        # Kept here: the rebalance may complete (and answer it) before this returns.
        waiter = member.join_waiter = Waiter()
        group.add(member)
        group.new_member_added = True
        self._schedule_session(group, member_id, req.session_timeout_ms)
        self._maybe_prepare_rebalance(group, f"{member_id} joined")
        return waiter

    def _update_member_and_rebalance(
        self, group: Group, member: Member, req: JoinRequest
    ) -> Waiter:
        member.protocols = list(req.protocols)
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        if member.join_waiter is not None:
            # A second join before the first was answered: the first client is gone
            # or retried; tell it to rejoin rather than leave it hanging.
            member.join_waiter.complete(JoinResult(E.REBALANCE_IN_PROGRESS, member.member_id))
        waiter = member.join_waiter = Waiter()
        self._maybe_prepare_rebalance(group, f"{member.member_id} rejoined")
        return waiter

    def _replace_static_member(
        self, group: Group, req: JoinRequest, old_id: str, new_id: str
    ) -> JoinResult | Waiter:
        """A static member came back (a restart) under a new member id: the old id is
        fenced; in a Stable group with the same subscription nothing rebalances."""
        old = group.members[old_id]
        if old.join_waiter is not None:
            old.join_waiter.complete(JoinResult(E.FENCED_INSTANCE_ID, old_id))
        if old.sync_waiter is not None:
            old.sync_waiter.complete(SyncResult(E.FENCED_INSTANCE_ID))
        old.join_waiter = old.sync_waiter = None
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        # As Kafka: the member's protocols are taken as sent (its subscription bytes carry
        # its generation, so they differ after any rebalance); only a change of the
        # protocol the group would select needs a rebalance.
        member.protocols = list(req.protocols)
        same = _selects(group, group.protocol_name)
        member.client_id, member.client_host = req.client_id, req.client_host
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        self._schedule_session(group, new_id, req.session_timeout_ms)
        if group.is_(S.STABLE) and same:
            # Persist the new member id before answering, so a coordinator that takes
            # over knows it; the member then syncs to get its assignment back.
            waiter = Waiter()
            generation = group.generation_id

            def stored(error: ErrorCode) -> None:
                if error != E.NONE:
                    if new_id in group.members and group.generation_id == generation:
                        group.replace_static_member(req.group_instance_id, new_id, old_id)
                    waiter.complete(JoinResult(error, new_id))
                else:
                    waiter.complete(self._join_result(group, member))

            self.manager.write(group.group_id, [self.manager.group_record(group)], stored)
            return waiter
        waiter = member.join_waiter = Waiter()
        self._maybe_prepare_rebalance(group, f"static member {req.group_instance_id} rejoined")
        if group.is_(S.PREPARING_REBALANCE):
            self.rebalances.check_and_complete(("join", group.group_id), self.now_ms())
        return waiter

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        is_leader = member.member_id == group.leader_id
        return JoinResult(
            E.NONE,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            [
                (m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()
            ]
            if is_leader and group.protocol_name is not None
            else [],
        )

    # -- rebalancing ------------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        now = self.now_ms()
        if group.is_(S.COMPLETING_REBALANCE):
            # The assignment being synced is for a generation that will not be.
            self._answer_syncs(group, E.REBALANCE_IN_PROGRESS)
        was_empty = group.is_(S.EMPTY)
        group.transition(S.PREPARING_REBALANCE, now)
        self.on_rebalance()
        log.info(
            "group %s: rebalancing (generation %d, %s)", group.group_id, group.generation_id, reason
        )
        if was_empty:
            delay = self.config.initial_rebalance_delay_ms
            operation: DelayedOperation = InitialDelayedJoin(
                self,
                group,
                now + delay,
                delay,
                max(group.max_rebalance_timeout_ms() - delay, 0),
            )
        else:
            operation = DelayedJoin(self, group, now + group.max_rebalance_timeout_ms())
        self.rebalances.try_complete_else_watch(operation, now)

    def _complete_join(self, group: Group) -> bool:
        """Every member rejoined, or time is up: start the next generation. Members that
        did not rejoin are removed (static ones stay until their session ends: that is
        what lets them restart without a rebalance). False when no member has rejoined
        yet but static members remain: the rebalance waits longer."""
        if group.is_(S.DEAD):
            return True
        now = self.now_ms()
        for member in group.not_yet_rejoined():
            if not member.is_static:
                self._remove_member(group, member)
        if group.members and not group.elect_joined_leader():
            return False
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.transition(S.EMPTY, now)
            log.info("group %s: empty at generation %d", group.group_id, group.generation_id)
            self.manager.write(
                group.group_id, [self.manager.group_record(group)], _log_failure(group)
            )
            return True
        group.protocol_name = group.select_protocol()
        group.transition(S.COMPLETING_REBALANCE, now)
        log.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        for member in group.members.values():
            waiter, member.join_waiter = member.join_waiter, None
            member.is_new = False
            self._heartbeat(group, member)
            if waiter is not None:
                waiter.complete(self._join_result(group, member))
        return True

    # -- SyncGroup ----------------------------------------------------------------------------
    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult | Waiter:
        error = self._group_error(group_id)
        if error != E.NONE:
            return SyncResult(error)
        group = self.manager.get(group_id)
        if group is None:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if group.is_(S.DEAD):
            return SyncResult(E.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return SyncResult(E.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return SyncResult(E.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(E.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_(S.EMPTY):
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if group.is_(S.PREPARING_REBALANCE):
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        if group.is_(S.STABLE):
            self._heartbeat(group, member)
            return self._sync_result(group, member)
        # CompletingRebalance: wait for the leader's assignment to be stored.
        if member.sync_waiter is not None:
            member.sync_waiter.complete(SyncResult(E.REBALANCE_IN_PROGRESS))
        waiter = member.sync_waiter = Waiter()
        if member_id == group.leader_id:
            self._store_assignment(group, assignments)  # may answer at once (one broker)
        return waiter

    def _store_assignment(self, group: Group, assignments: dict[str, bytes]) -> None:
        # Members the leader left out get an empty assignment: for consumers a valid empty
        # one (Kafka sends zero bytes, which kafka-python cannot decode).
        empty = EMPTY_CONSUMER_ASSIGNMENT if group.protocol_type == CONSUMER_PROTOCOL_TYPE else b""
        complete = {m: assignments.get(m, empty) for m in group.members}
        generation = group.generation_id

        def stored(error: ErrorCode) -> None:
            if not (group.is_(S.COMPLETING_REBALANCE) and group.generation_id == generation):
                return  # the group moved on meanwhile; that rebalance answers the members
            if error != E.NONE:
                self._answer_syncs(group, error)
                self._prepare_rebalance(group, f"storing the assignment failed: {error.name}")
                return
            for member_id, assignment in complete.items():
                if member_id in group.members:
                    group.members[member_id].assignment = assignment
            group.transition(S.STABLE, self.now_ms())
            log.info("group %s: stable at generation %d", group.group_id, generation)
            for member in group.members.values():
                if member.sync_waiter is not None:
                    waiter, member.sync_waiter = member.sync_waiter, None
                    self._heartbeat(group, member)
                    waiter.complete(self._sync_result(group, member))

        self.manager.write(group.group_id, [self.manager.group_record(group, complete)], stored)

    def _sync_result(self, group: Group, member: Member) -> SyncResult:
        return SyncResult(E.NONE, member.assignment, group.protocol_type, group.protocol_name)

    def _answer_syncs(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.sync_waiter is not None:
                waiter, member.sync_waiter = member.sync_waiter, None
                waiter.complete(SyncResult(error))

    # -- Heartbeat ------------------------------------------------------------------------
    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        error = self._group_error(group_id)
        if error != E.NONE:
            return error
        group = self.manager.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, group_instance_id):
            return E.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.is_(S.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        self._heartbeat(group, member)
        if group.is_(S.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS  # rejoin
        return E.NONE  # Stable, or CompletingRebalance (the member may heartbeat before syncing)

    # -- LeaveGroup -----------------------------------------------------------------------
    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Members (member id, instance id) leave: the group-level error and each one's."""
        error = self._group_error(group_id)
        if error != E.NONE:
            return error, [error] * len(members)
        group = self.manager.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID, [E.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE, [E.COORDINATOR_NOT_AVAILABLE] * len(members)
        results = [self._leave(group, member_id, instance_id) for member_id, instance_id in members]
        return E.NONE, results

    def _leave(self, group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            if member_id and member_id != current:
                return E.FENCED_INSTANCE_ID
            member_id = current
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._member_gone(group, f"pending member {member_id} left")
            return E.NONE
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        self._remove_member(group, member)
        self._member_gone(group, f"{member_id} left")
        return E.NONE

    # -- members leaving and failing ------------------------------------------------------
    def _remove_member(self, group: Group, member: Member) -> None:
        group.remove(member.member_id)
        if member.join_waiter is not None:
            member.join_waiter.complete(JoinResult(E.UNKNOWN_MEMBER_ID, member.member_id))
        if member.sync_waiter is not None:
            member.sync_waiter.complete(SyncResult(E.UNKNOWN_MEMBER_ID))
        member.join_waiter = member.sync_waiter = None
        # Its session timer finds it gone and does nothing.
        self.sessions.check_and_complete((group.group_id, member.member_id), self.now_ms())

    def _member_gone(self, group: Group, reason: str) -> None:
        if group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.is_(S.PREPARING_REBALANCE):
            self.rebalances.check_and_complete(("join", group.group_id), self.now_ms())

    def _session_expired(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._member_gone(group, f"pending member {member_id} never joined")
            return
        member = group.members.get(member_id)
        if member is None or group.is_(S.DEAD):
            return
        log.info(
            "group %s: member %s failed (no heartbeat within %d ms)",
            group.group_id,
            member_id,
            member.session_timeout_ms,
        )
        self._remove_member(group, member)
        self._member_gone(group, f"{member_id}'s session timed out")

    # -- sessions -------------------------------------------------------------------------
    def _heartbeat(self, group: Group, member: Member) -> None:
        """The member is alive: its session starts again from now."""
        self._schedule_session(group, member.member_id, member.session_timeout_ms)

    def _schedule_session(
        self, group: Group, member_id: str, session_timeout_ms: int, pending: bool = False
    ) -> None:
        now = self.now_ms()
        deadline = now + session_timeout_ms
        member = group.members.get(member_id)
        if member is not None:
            member.session_deadline_ms = deadline
        key = (group.group_id, member_id)
        # The previous timer sees the later deadline and finishes quietly.
        self.sessions.check_and_complete(key, now)
        self.sessions.try_complete_else_watch(
            SessionTimer(self, group, member_id, deadline, pending), now
        )

    # -- loading and unloading --------------------------------------------------------------
    def _group_loaded(self, group: Group) -> None:
        for member in group.members.values():
            self._heartbeat(group, member)

    def _group_unloaded(self, group: Group) -> None:
        for member in group.members.values():
            for waiter, result in (
                (member.join_waiter, JoinResult(E.NOT_COORDINATOR, member.member_id)),
                (member.sync_waiter, SyncResult(E.NOT_COORDINATOR)),
            ):
                if waiter is not None:
                    waiter.complete(result)
            member.join_waiter = member.sync_waiter = None
        now = self.now_ms()
        self.rebalances.check_and_complete(("join", group.group_id), now)
        for member_id in list(group.members) + list(group.pending_members):
            self.sessions.check_and_complete((group.group_id, member_id), now)

    # -- offsets ----------------------------------------------------------------------------
    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[tuple[str, int], CommittedOffset],
    ) -> dict[tuple[str, int], ErrorCode] | Waiter:
        """Store a member's (or a standalone consumer's) offsets; the answer per
        partition, at once for refusals, else once the replicas have the records."""

        def every(code: ErrorCode) -> dict[tuple[str, int], ErrorCode]:
            return {tp: code for tp in offsets}

        error = self._group_error(group_id, allow_empty_id=True)
        if error != E.NONE:
            return every(error)
        group = self.manager.get(group_id)
        decision = decide_offset_commit(group, generation_id, member_id, group_instance_id)
        if isinstance(decision, ErrorCode):
            return every(decision)
        if group is None:
            group = self.manager.add(Group(group_id, state_timestamp_ms=self.now_ms()))
        if decision.heartbeat:
            self._heartbeat(group, group.members[member_id])
        return self._store_offsets(group, offsets)

    def commit_txn_offsets(
        self,
        group_id: str,
        producer: tuple[int, int],
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[tuple[str, int], CommittedOffset],
    ) -> dict[tuple[str, int], ErrorCode] | Waiter:
        """TxnOffsetCommit: write the offsets in the producer's (id, epoch) transaction;
        they stay pending, invisible to OffsetFetch, until its marker completes them
        (`complete_transaction`)."""
        error = self._group_error(group_id)
        if error != E.NONE:
            return {tp: error for tp in offsets}
        group = self.manager.get(group_id)
        decision = decide_txn_offset_commit(
            group or Group(group_id), generation_id, member_id, group_instance_id
        )
        if decision is not None:
            return {tp: decision for tp in offsets}
        if group is None:
            group = self.manager.add(Group(group_id, state_timestamp_ms=self.now_ms()))
        return self._store_offsets(group, offsets, producer)

    def complete_transaction(
        self, offsets_partition: int, producer_id: int, committed: bool
    ) -> None:
        """The producer's COMMIT (`committed`) or ABORT marker was appended to
        `offsets_partition` of __consumer_offsets and replicated: its pending offsets of
        the groups there become committed offsets, or are dropped."""
        applied = self.manager.complete_transaction(offsets_partition, producer_id, committed)
        if applied:
            self.on_offsets_stored(applied)

    def _store_offsets(
        self,
        group: Group,
        offsets: dict[tuple[str, int], CommittedOffset],
        producer: tuple[int, int] | None = None,
    ) -> dict[tuple[str, int], ErrorCode] | Waiter:
        answers: dict[tuple[str, int], ErrorCode] = {}
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        for tp, committed in offsets.items():
            if len((committed.metadata or "").encode()) > self.config.offset_metadata_max_bytes:
                answers[tp] = E.OFFSET_METADATA_TOO_LARGE
            elif not self.topic_exists(*tp):
                answers[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                accepted[tp] = committed
        if not accepted:
            return answers
        waiter = Waiter()
        records = [
            self.manager.offset_record(group.group_id, topic, partition, committed)
            for (topic, partition), committed in accepted.items()
        ]
        batch = self.manager.end_offset(group.group_id)  # where the records will be
        entries = {tp: PendingOffset(c, batch) for tp, c in accepted.items()}
        if producer is None:
            group.commits_in_flight.update(accepted.keys())
        else:
            # Pending from now, before the write is done (as Kafka), so that require_stable
            # fetches already see the partition as unstable.
            pending = group.pending_txn_offsets.setdefault(producer[0], {})
            replaced = {tp: pending.get(tp) for tp in entries}
            pending.update(entries)
            self.manager.track_producer(producer[0], group.group_id)

        def stored(error: ErrorCode) -> None:
            if producer is None:
                group.commits_in_flight.subtract(accepted.keys())
                group.commits_in_flight += Counter()  # drops the zero counts
                if error == E.NONE and not group.is_(S.DEAD):
                    for tp, committed in accepted.items():
                        group.store_offset(tp, committed, batch)
                    self.on_offsets_stored(len(accepted))
            elif error != E.NONE:
                # Never written (a fenced epoch, a lost leadership): not part of the
                # transaction; what it replaced is pending again.
                pending = group.pending_txn_offsets.get(producer[0], {})
                for tp, entry in entries.items():
                    if pending.get(tp) is entry:
                        if replaced[tp] is None:
                            del pending[tp]
                        else:
                            pending[tp] = replaced[tp]
                if not pending:
                    group.pending_txn_offsets.pop(producer[0], None)
            for tp in accepted:
                answers[tp] = error
            waiter.complete(answers)

        self.manager.write(
            group.group_id,
            records,
            stored,
            too_large=E.INVALID_COMMIT_OFFSET_SIZE,
            producer=producer,
        )
        return waiter

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[ErrorCode, dict[tuple[str, int], CommittedOffset | None]]:
        """Committed offsets (None: nothing committed) of the partitions asked for, or of
        every partition the group has committed when `partitions` is None. Pending
        transactional commits are not committed offsets yet."""
        error = self._group_error(group_id, allow_empty_id=True)
        if error != E.NONE:
            return error, {}
        group = self.manager.get(group_id)
        offsets = {} if group is None or group.is_(S.DEAD) else group.offsets
        if partitions is None:
            return E.NONE, dict(offsets)
        return E.NONE, {tp: offsets.get(tp) for tp in partitions}

    def unstable_offsets(self, group_id: str, partitions) -> set[tuple[str, int]]:
        """Of `partitions`, those with a commit being written or waiting for its
        transaction: OffsetFetch with require_stable answers them UNSTABLE_OFFSET_COMMIT
        (KIP-447), so a new member does not start from an offset about to change."""
        group = self.manager.get(group_id)
        if group is None or group.is_(S.DEAD):
            return set()
        return {tp for tp in partitions if group.has_pending_offset(tp)}

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]] | Waiter:
        """OffsetDelete: forget committed offsets, except of topics the group's members
        still consume (GROUP_SUBSCRIBED_TO_TOPIC)."""
        error = self._group_error(group_id, allow_empty_id=True)
        if error != E.NONE:
            return error, {}
        group = self.manager.get(group_id)
        if group is None or group.is_(S.DEAD):
            return E.GROUP_ID_NOT_FOUND, {}
        if group.members and group.protocol_type != "consumer":
            return E.NON_EMPTY_GROUP, {}
        subscribed = group.subscribed_topics() if group.members else set()
        answers: dict[tuple[str, int], ErrorCode] = {}
        deleting = []
        for tp in partitions:
            if subscribed is None or tp[0] in subscribed:
                answers[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                answers[tp] = E.NONE
                if tp in group.offsets:
                    deleting.append(tp)
        if not deleting:
            return E.NONE, answers
        waiter = Waiter()

        def stored(error: ErrorCode) -> None:
            if error == E.NONE:
                for tp in deleting:
                    group.offsets.pop(tp, None)
                waiter.complete((E.NONE, answers))
            else:
                waiter.complete((error, {}))

        self.manager.write(
            group_id,
            [self.manager.offset_record(group_id, t, p, None) for t, p in deleting],
            stored,
        )
        return waiter

    # -- administration ---------------------------------------------------------------------
    def list_groups(self, states: set[str] | None = None) -> tuple[ErrorCode, list[Group]]:
        if self.manager.any_loading():
            return E.COORDINATOR_LOAD_IN_PROGRESS, []
        wanted = {s.lower() for s in states} if states else None
        groups = [
            g
            for g in self.manager.groups.values()
            if not g.is_(S.DEAD) and (wanted is None or g.state.value.lower() in wanted)
        ]
        return E.NONE, groups

    def describe_group(self, group_id: str) -> tuple[ErrorCode, Group | None]:
        error = self._group_error(group_id, allow_empty_id=True)
        if error != E.NONE:
            return error, None
        return E.NONE, self.manager.get(group_id)

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode] | Waiter:
        """Delete empty groups and their offsets (tombstones for all of it)."""
        answers: dict[str, ErrorCode] = {}
        deleting: list[Group] = []
        for group_id in group_ids:
            error = self._group_error(group_id, allow_empty_id=True)
            group = self.manager.get(group_id)
            if error != E.NONE:
                answers[group_id] = error
            elif group is None or group.is_(S.DEAD):
                answers[group_id] = E.GROUP_ID_NOT_FOUND
            elif not group.is_(S.EMPTY):
                answers[group_id] = E.NON_EMPTY_GROUP
            else:
                deleting.append(group)
        if not deleting:
            return answers
        waiter = Waiter()
        remaining = len(deleting)
        for group in deleting:
            # Dead at once: nothing joins or commits to it while its tombstones are written.
            group.transition(S.DEAD, self.now_ms())
            self.manager.remove(group.group_id)
            records = [
                self.manager.offset_record(group.group_id, t, p, None) for t, p in group.offsets
            ]
            records.append(self.manager.group_tombstone(group.group_id))

            def stored(error: ErrorCode, group_id: str = group.group_id) -> None:
                nonlocal remaining
                answers[group_id] = error
                remaining -= 1
                if remaining == 0:
                    waiter.complete(answers)

            self.manager.write(group.group_id, records, stored)
        return waiter

    # -- offsets retention -----------------------------------------------------------------
    def expire_offsets(self) -> int:
        """Remove offsets past their retention (docs/contracts/consumer-groups.md), and the groups
        left empty with none; returns how many offsets went."""
        now = self.now_ms()
        retention = self.config.offsets_retention_ms
        removed = 0
        for group in list(self.manager.groups.values()):
            if self.manager.status(group.group_id) != E.NONE or group.is_(S.DEAD):
                continue
            expired = _expired_offsets(group, now, retention)
            for tp in expired:
                del group.offsets[tp]
            records = [self.manager.offset_record(group.group_id, t, p, None) for t, p in expired]
            if (
                group.is_(S.EMPTY)
                and not group.offsets
                and not group.pending_members
                and not group.pending_txn_offsets
            ):
                group.transition(S.DEAD, now)
                self.manager.remove(group.group_id)
                records.append(self.manager.group_tombstone(group.group_id))
            if records:
                removed += len(expired)
                self.manager.write(group.group_id, records, _log_failure(group))
        if removed:
            log.info("expired %d committed offsets", removed)
        return removed

    # -- checks every group request makes ---------------------------------------------------
    def _group_error(self, group_id: str | None, allow_empty_id: bool = False) -> ErrorCode:
        if group_id is None or (not group_id and not allow_empty_id):
            return E.INVALID_GROUP_ID
        return self.manager.status(group_id)


def _expired_offsets(group: Group, now: int, retention: int) -> list[tuple[str, int]]:
    """Kafka's rule (KIP-211): a group with no members loses its offsets `retention`
    after it became empty; a standalone group's offsets expire `retention` after their
    commit; a Stable consumer group's offsets of topics it no longer subscribes to expire
    after their commit. Commits that asked for a retention of their own expire then."""
    explicit = [
        tp
        for tp, c in group.offsets.items()
        if c.expire_timestamp_ms is not None and c.expire_timestamp_ms <= now
    ]
    if group.protocol_type is not None and group.is_(S.EMPTY):

        def since(c: CommittedOffset) -> int:
            return (
                group.state_timestamp_ms if group.state_timestamp_ms >= 0 else c.commit_timestamp_ms
            )

        subscribed = None
    elif group.protocol_type is None:

        def since(c: CommittedOffset) -> int:
            return c.commit_timestamp_ms

        subscribed = None
    elif group.is_(S.STABLE) and (subscribed := group.subscribed_topics()) is not None:

        def since(c: CommittedOffset) -> int:
            return c.commit_timestamp_ms
    else:
        return explicit
    aged = [
        tp
        for tp, c in group.offsets.items()
        if c.expire_timestamp_ms is None
        and since(c) + retention <= now
        and (subscribed is None or tp[0] not in subscribed)
    ]
    return explicit + aged


def _log_failure(group: Group) -> Callable[[ErrorCode], None]:
    def done(error: ErrorCode) -> None:
        if error != E.NONE:
            log.warning("group %s: writing its metadata failed: %s", group.group_id, error.name)

    return done


class DelayedJoin(DelayedOperation):
    """A rebalance: completes when every member has rejoined, or at the longest rebalance
    timeout of the members (those that did not rejoin are then removed)."""

    def __init__(self, coordinator: GroupCoordinator, group: Group, deadline_ms: int) -> None:
        super().__init__(deadline_ms, [("join", group.group_id)])
        self.coordinator = coordinator
        self.group = group

    def try_complete(self, now_ms: int) -> bool:
        if self.group.is_(S.DEAD) or not self.group.is_(S.PREPARING_REBALANCE):
            return self.complete(None)
        if self.group.has_all_members_joined() and self.coordinator._complete_join(self.group):
            return self.complete(None)
        return False

    def on_expiration(self, now_ms: int) -> None:
        if self.group.is_(S.PREPARING_REBALANCE) and not self.coordinator._complete_join(
            self.group
        ):
            # Only static members that have not rejoined are left: wait for them (or
            # for their sessions to end) another rebalance timeout.
            self.coordinator.rebalances.try_complete_else_watch(
                DelayedJoin(
                    self.coordinator, self.group, now_ms + self.group.max_rebalance_timeout_ms()
                ),
                now_ms,
            )


class InitialDelayedJoin(DelayedOperation):
    """The first rebalance of an empty group waits `delay` for more members; each new
    member extends the wait by up to `delay` again, never beyond the rebalance timeout."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        group: Group,
        deadline_ms: int,
        delay_ms: int,
        remaining_ms: int,
    ) -> None:
        super().__init__(deadline_ms, [("join", group.group_id)])
        self.coordinator = coordinator
        self.group = group
        self.delay_ms = delay_ms
        self.remaining_ms = remaining_ms
        group.new_member_added = False

    def try_complete(self, now_ms: int) -> bool:
        if not self.group.is_(S.PREPARING_REBALANCE):
            return self.complete(None)
        return False  # wait out the delay

    def on_expiration(self, now_ms: int) -> None:
        group = self.group
        if not group.is_(S.PREPARING_REBALANCE):
            return
        if group.new_member_added and self.remaining_ms > 0:
            delay = min(self.delay_ms, self.remaining_ms)
            self.coordinator.rebalances.try_complete_else_watch(
                InitialDelayedJoin(
                    self.coordinator,
                    group,
                    now_ms + delay,
                    self.delay_ms,
                    self.remaining_ms - delay,
                ),
                now_ms,
            )
            return
        # From here on, an ordinary rebalance: done once everyone has joined.
        self.coordinator.rebalances.try_complete_else_watch(
            DelayedJoin(self.coordinator, group, now_ms + group.max_rebalance_timeout_ms()),
            now_ms,
        )


class SessionTimer(DelayedOperation):
    """A member's session: removed at `deadline_ms` unless it heartbeated since (a newer
    timer then watches it) or is waiting for a join or sync answer (the rebalance's own
    timeout governs it then)."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        group: Group,
        member_id: str,
        deadline_ms: int,
        pending: bool,
    ) -> None:
        super().__init__(deadline_ms, [(group.group_id, member_id)])
        self.coordinator = coordinator
        self.group = group
        self.member_id = member_id
        self.pending = pending

    def _superseded(self) -> bool:
        group = self.group
        if group.is_(S.DEAD):
            return True
        if self.pending:
            return self.member_id not in group.pending_members
        member = group.members.get(self.member_id)
        return member is None or member.session_deadline_ms > self.deadline_ms

    def try_complete(self, now_ms: int) -> bool:
        return self._superseded() and self.complete(None)

    def on_expiration(self, now_ms: int) -> None:
        if self._superseded():
            return
        member = self.group.members.get(self.member_id)
        if member is not None and (
            member.join_waiter is not None or member.sync_waiter is not None
        ):
            # Waiting for the group's answer, not silent: the rebalance decides; its
            # session goes on from here.
            self.coordinator._schedule_session(
                self.group, self.member_id, member.session_timeout_ms
            )
            return
        self.coordinator._session_expired(self.group, self.member_id)


def _selects(group: Group, protocol: str | None) -> bool:
    """Whether the group, with its members' protocols as they are now, would still select
    `protocol`."""
    if protocol is None:
        return False
    try:
        return group.select_protocol() == protocol
    except ValueError:  # no protocol in common any more
        return False
