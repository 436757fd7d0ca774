"""Membership of a group, Kafka's classic group protocol as a client: find the
coordinator, JoinGroup, SyncGroup, heartbeats (heartbeat.py), LeaveGroup.

What the member subscribes to and how assignments are computed and applied is the
consumer's business (rebalance.py), reached through `GroupHooks`; this module only moves
the bytes and keeps the member's standing: its generation, member id, state, and whether
it must rejoin. That standing is shared with the heartbeat thread, under `lock`.

How each error is handled follows Kafka's client:
- MEMBER_ID_REQUIRED (JoinGroup v4+, KIP-394): adopt the id the coordinator handed out
  and join again at once;
- UNKNOWN_MEMBER_ID: forget the member id and generation, rejoin; ILLEGAL_GENERATION:
  forget the generation (keep the member id), rejoin; either way the member's partitions
  are lost (they may be someone else's by now);
- REBALANCE_IN_PROGRESS: rejoin (JoinGroup: after a backoff);
- NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a broken connection: find the coordinator
  again, retry; COORDINATOR_LOAD_IN_PROGRESS: retry after a backoff;
- FENCED_INSTANCE_ID (another process took this group.instance.id): fatal, raised from
  every later call;
- anything else (INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT,
  GROUP_MAX_SIZE_REACHED, ...): raised to the caller of poll().

The coordinator holds a JoinGroup until every member has rejoined (up to the rebalance
timeout, max.poll.interval.ms) and a follower's SyncGroup until the leader's: such a
request stays in flight across polls, each poll() waiting for its answer only as long as
its own timeout allows (as Kafka's poll() does).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from typing import NamedTuple, Protocol

from broker.client.cluster import ClusterMetadata
from broker.client.connection import UNREACHABLE, BrokerConnection
from broker.client.coordinator import find_coordinator
from broker.cluster import Node
from broker.protocol.apis import (
    API_BY_KEY,
    JOIN_GROUP,
    LEAVE_GROUP,
    SYNC_GROUP,
)
from broker.protocol.errors import (
    ErrorCode,
    KafkaError,
    NetworkError,
    RequestTimedOutError,
    UnsupportedVersionError,
    as_error_code,
    error_for,
)

log = logging.getLogger(__name__)

# Kafka's client gives a JoinGroup this much beyond the rebalance timeout to come back.
_JOIN_GROUP_LAPSE_S = 5.0
REDISCOVER = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})


class MemberState(enum.Enum):
    UNJOINED = "unjoined"  # not in the group (never joined, left, or removed)
    REBALANCING = "rebalancing"  # JoinGroup / SyncGroup under way: no heartbeats
    STABLE = "stable"  # assigned: heartbeats run


class Generation(NamedTuple):
    generation_id: int
    member_id: str
    protocol: str | None

    @property
    def valid(self) -> bool:
        return self.generation_id >= 0 and self.member_id != ""


NO_GENERATION = Generation(-1, "", None)


class GroupHooks(Protocol):
    """What the member's protocol decides (the consumer's, protocol type "consumer"; the
    schema registry's leader election, "sr"); called on the polling thread."""

    protocol_type: str  # JoinGroup's and SyncGroup's protocol_type

    def join_protocols(self) -> list[dict]:
        """[{name, metadata}] in order of preference, for JoinGroup."""

    def on_join_prepare(self, generation: Generation, lost: bool) -> None:
        """Before joining: commit, and revoke (or, when lost, drop) partitions."""

    def perform_assignment(self, protocol: str, members: list[dict]) -> dict[str, bytes]:
        """As the leader: member id -> assignment bytes, from JoinGroup's member list."""

    def on_join_complete(self, generation: Generation, assignment: bytes) -> None:
        """SyncGroup's answer: apply the assignment."""


class _InFlight(NamedTuple):
    api_key: int
    conn: BrokerConnection
    coordinator: Node
    correlation_id: int
    expires: float  # monotonic time after which the answer is given up on


class _Retry(Exception):
    """Join again; after a backoff when `backoff`."""

    def __init__(self, reason: str, backoff: bool):
        super().__init__(reason)
        self.backoff = backoff


class GroupMembership:
    """This member's standing in its group; see the module docstring."""

    def __init__(self, cluster: ClusterMetadata, config: dict, hooks: GroupHooks):
        self.cluster = cluster
        self.hooks = hooks
        self.group_id: str = config["group.id"]
        self.instance_id: str | None = config["group.instance.id"]
        self.client_id: str = config["client.id"]
        self.session_timeout_ms: int = config["session.timeout.ms"]
        self.rebalance_timeout_ms: int = config["max.poll.interval.ms"]
        self.heartbeat_interval_s: float = config["heartbeat.interval.ms"] / 1000
        self.request_timeout_s: float = config["request.timeout.ms"] / 1000
        self.retry_backoff_s: float = config["retry.backoff.ms"] / 1000

        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)  # wakes the heartbeat thread
        self.state = MemberState.UNJOINED
        self.generation = NO_GENERATION
        self.rejoin_needed = True
        self.coordinator: Node | None = None
        self.fatal: KafkaError | None = None
        self.closed = False
        self.last_poll = time.monotonic()
        self.last_heartbeat_ok = time.monotonic()
        self._join_prepared = False
        self._conn: BrokerConnection | None = None  # the polling thread's, to the coordinator
        self._conn_for: Node | None = None
        self._in_flight: _InFlight | None = None  # the JoinGroup or SyncGroup under way

    # --- standing (any thread) ------------------------------------------------------

    def request_rejoin(self, reason: str) -> None:
        with self.lock:
            if not self.rejoin_needed:
                log.info("group %s: rejoining: %s", self.group_id, reason)
            self.rejoin_needed = True
            self.changed.notify_all()  # a poll() waiting for work wakes up

    def reset_generation(self, keep_member_id: bool, reason: str) -> None:
        """Out of the group: the generation (and member id) no longer hold; rejoin."""
        with self.lock:
            log.info("group %s: generation %s reset: %s", self.group_id, self.generation, reason)
            member_id = self.generation.member_id if keep_member_id else ""
            self.generation = Generation(-1, member_id, None)
            self.state = MemberState.UNJOINED
            self.rejoin_needed = True
            self._join_prepared = False  # prepare again: the partitions are lost now
            self.changed.notify_all()

    def coordinator_dead(self, coordinator: Node | None, reason: str) -> None:
        """Forget `coordinator` (if still the current one): it is found again before use."""
        with self.lock:
            if coordinator is not None and self.coordinator == coordinator:
                log.info(
                    "group %s: coordinator %s unusable: %s", self.group_id, coordinator, reason
                )
                self.coordinator = None
                self.changed.notify_all()

    def set_fatal(self, error: KafkaError) -> None:
        with self.lock:
            self.fatal = error
            self.changed.notify_all()

    def raise_if_fatal(self) -> None:
        with self.lock:
            if self.fatal is not None:
                raise self.fatal

    def member_standing(self) -> tuple[Generation, MemberState]:
        with self.lock:
            return self.generation, self.state

    # --- the coordinator (polling thread) --------------------------------------------

    def coordinator_connection(self, deadline: float) -> tuple[BrokerConnection, Node] | None:
        """The polling thread's connection to the coordinator, finding it first if needed;
        None when the deadline passes first. Non-retriable errors are raised."""
        while True:
            self.raise_if_fatal()
            with self.lock:
                coordinator = self.coordinator
            if coordinator is None:
                coordinator = self._discover()
            if coordinator is not None:
                conn = self._connect(coordinator)
                if conn is not None:
                    return conn, coordinator
            if time.monotonic() + self.retry_backoff_s > deadline:
                return None
            time.sleep(self.retry_backoff_s)

    def _discover(self) -> Node | None:
        try:
            conn = self.cluster.any_connection()
            coordinator = find_coordinator(conn, self.group_id)
        except UNREACHABLE as exc:
            log.debug("group %s: FindCoordinator failed: %s", self.group_id, exc)
            self._refresh_metadata()
            return None
        except KafkaError as exc:
            if not exc.retriable:
                raise
            log.debug("group %s: FindCoordinator: %s", self.group_id, exc)
            return None
        with self.lock:
            self.coordinator = coordinator
        log.info("group %s: coordinator is %s", self.group_id, coordinator)
        return coordinator

    def _refresh_metadata(self) -> None:
        try:
            self.cluster.refresh([])
        except NetworkError:
            pass

    def _connect(self, coordinator: Node) -> BrokerConnection | None:
        if self._conn is not None and not self._conn.closed and self._conn_for == coordinator:
            return self._conn
        self.close_connection()
        try:
            self._conn = self.cluster.open_connection(
                coordinator.host, coordinator.port, self.request_timeout_s
            )
        except UNREACHABLE as exc:
            self.coordinator_dead(coordinator, str(exc))
            return None
        self._conn_for = coordinator
        return self._conn

    def close_connection(self) -> None:
        """Close the polling thread's connection; a JoinGroup or SyncGroup in flight on it
        is abandoned (the member joins again)."""
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self._conn_for = None
        self._in_flight = None

    # --- joining (polling thread) -----------------------------------------------------

    def need_rejoin(self) -> bool:
        with self.lock:
            return self.rejoin_needed or self.state != MemberState.STABLE

    def ensure_active_group(self, deadline: float) -> bool:
        """Join or rejoin when needed. False when the deadline passed before the member
        was in the group: a JoinGroup or SyncGroup the coordinator holds stays in flight,
        and the next call carries on waiting for its answer."""
        while self.need_rejoin():
            self.raise_if_fatal()
            try:
                if self._in_flight is None and not self._send_join(deadline):
                    return False
                response = self._answer(deadline)
                if response is None:
                    return False
                self._handle(response)
            except _Retry as retry:
                log.debug("group %s: join again: %s", self.group_id, retry)
                if retry.backoff:
                    if time.monotonic() + self.retry_backoff_s > deadline:
                        return False
                    time.sleep(self.retry_backoff_s)
            except KafkaError as exc:
                if exc.code == ErrorCode.FENCED_INSTANCE_ID:
                    self.set_fatal(exc)
                raise
        return True

    def _send_join(self, deadline: float) -> bool:
        found = self.coordinator_connection(deadline)
        if found is None:
            return False
        conn, coordinator = found
        if not self._join_prepared:
            with self.lock:
                generation = self.generation
            self.hooks.on_join_prepare(generation, lost=not generation.valid)
            self._join_prepared = True
        with self.lock:
            self.state = MemberState.REBALANCING
            member_id = self.generation.member_id
        version = conn.version_for(JOIN_GROUP)
        if self.instance_id is not None and version < 5:
            raise UnsupportedVersionError(
                f"group.instance.id needs JoinGroup v5; {conn.host}:{conn.port} speaks v{version}"
            )
        body = {
            "group_id": self.group_id,
            "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "member_id": member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": self.hooks.protocol_type,
            "protocols": self.hooks.join_protocols(),
        }
        # The coordinator holds a JoinGroup until the group has joined (up to the
        # rebalance timeout): Kafka's client allows that much and a little more.
        wait_s = max(self.request_timeout_s, self.rebalance_timeout_ms / 1000 + _JOIN_GROUP_LAPSE_S)
        self._send(conn, coordinator, JOIN_GROUP, body, wait_s, version)
        return True

    def _send(self, conn, coordinator, api_key, body, wait_s, version=None) -> None:
        try:
            cid = conn.send(api_key, body, version)
        except UNREACHABLE as exc:
            self.close_connection()
            self.coordinator_dead(coordinator, str(exc))
            raise _Retry(str(exc), backoff=True) from exc
        self._in_flight = _InFlight(api_key, conn, coordinator, cid, time.monotonic() + wait_s)

    def _answer(self, deadline: float) -> dict | None:
        """The answer to the request in flight, or None if it has not come by `deadline`
        (the request stays in flight). Past the request's own timeout, or on a broken
        connection, the coordinator is found again and the member rejoins."""
        flight = self._in_flight
        try:
            ready = flight.conn.ready(
                flight.correlation_id, max(0.0, min(deadline, flight.expires) - time.monotonic())
            )
            if not ready:
                if time.monotonic() < flight.expires:
                    return None
                raise RequestTimedOutError(
                    f"no answer to {API_BY_KEY[flight.api_key].name} in time"
                )
            return flight.conn.receive(flight.correlation_id)
        except UNREACHABLE as exc:
            self._in_flight = None
            self.close_connection()
            self.coordinator_dead(flight.coordinator, str(exc))
            raise _Retry(str(exc), backoff=True) from exc

    def _handle(self, response: dict) -> None:
        flight, self._in_flight = self._in_flight, None
        if flight.api_key == JOIN_GROUP:
            self._joined(response, flight.conn, flight.coordinator)
        else:
            self._synced(response, flight.coordinator)

    def _joined(self, response: dict, conn: BrokerConnection, coordinator: Node) -> None:
        code = as_error_code(response["error_code"])
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            with self.lock:
                self.generation = Generation(-1, response["member_id"], None)
            raise _Retry("the coordinator handed out a member id", backoff=False)
        self._raise_for_group_error("JoinGroup", code, coordinator)
        generation = Generation(
            response["generation_id"], response["member_id"], response["protocol_name"]
        )
        with self.lock:
            self.generation = generation
        log.info("group %s: joined generation %s", self.group_id, generation)
        assignments: dict[str, bytes] = {}
        if response["leader"] == response["member_id"]:
            try:
                assignments = self.hooks.perform_assignment(
                    response["protocol_name"], response["members"]
                )
            except UNREACHABLE as exc:
                raise _Retry(f"leader could not assign: {exc}", backoff=True) from exc
        body = {
            "group_id": self.group_id,
            "generation_id": generation.generation_id,
            "member_id": generation.member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": self.hooks.protocol_type,  # v5+: the coordinator checks them
            "protocol_name": generation.protocol,
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments.items()],
        }
        # Followers' SyncGroup waits for the leader's: held like a JoinGroup.
        self._send(
            conn,
            coordinator,
            SYNC_GROUP,
            body,
            self.request_timeout_s + self.session_timeout_ms / 1000,
        )

    def _synced(self, response: dict, coordinator: Node) -> None:
        code = as_error_code(response["error_code"])
        self._raise_for_group_error("SyncGroup", code, coordinator)
        with self.lock:
            generation = self.generation
            if not generation.valid:  # put out of the group meanwhile (a failed commit)
                raise _Retry("generation reset during SyncGroup", backoff=False)
            self.state = MemberState.STABLE
            self.rejoin_needed = False  # before the hook: it may ask for a rejoin
            self.last_heartbeat_ok = time.monotonic()
            self._join_prepared = False
            self.changed.notify_all()
        self.hooks.on_join_complete(generation, response["assignment"])

    def _raise_for_group_error(self, api: str, code: ErrorCode, coordinator: Node) -> None:
        if code == ErrorCode.NONE:
            return
        if code == ErrorCode.UNKNOWN_MEMBER_ID:
            self.reset_generation(keep_member_id=False, reason=f"{api}: {code.name}")
            raise _Retry(code.name, backoff=False)
        if code == ErrorCode.ILLEGAL_GENERATION:
            self.reset_generation(keep_member_id=True, reason=f"{api}: {code.name}")
            raise _Retry(code.name, backoff=False)
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            raise _Retry(code.name, backoff=api == "JoinGroup")
        if code in REDISCOVER:
            self.close_connection()
            self.coordinator_dead(coordinator, f"{api}: {code.name}")
            raise _Retry(code.name, backoff=True)
        if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            raise _Retry(code.name, backoff=True)
        raise error_for(code, f"{api} of group {self.group_id!r}")

    # --- leaving ----------------------------------------------------------------------

    def leave_group(self, reason: str) -> None:
        """LeaveGroup for a dynamic member in the group (a static one just stops: its
        session timeout ends its membership, so a restart keeps its assignment); then the
        member is out either way."""
        with self.lock:
            generation, coordinator = self.generation, self.coordinator
        if self._in_flight is not None:
            self.close_connection()  # a held JoinGroup would hold the LeaveGroup behind it
        if self.instance_id is None and generation.member_id and coordinator is not None:
            try:
                conn = self._connect(coordinator)
                if conn is not None:
                    send_leave_group(conn, self.group_id, generation.member_id, reason)
            except KafkaError as exc:
                log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
        self.reset_generation(keep_member_id=False, reason=f"left the group: {reason}")

    def close(self) -> None:
        """Stops the heartbeat thread (it watches `closed`) and the polling thread's connection."""
        with self.lock:
            self.closed = True
            self.changed.notify_all()
        self.close_connection()


def send_leave_group(conn: BrokerConnection, group_id: str, member_id: str, reason: str) -> None:
    """LeaveGroup for one dynamic member (v0-v2 name it; v3+ list it, KIP-345; v5 with a
    reason); errors are logged: the member is leaving anyway."""
    body = {
        "group_id": group_id,
        "member_id": member_id,
        "members": [{"member_id": member_id, "group_instance_id": None, "reason": reason}],
    }
    response = conn.request(LEAVE_GROUP, body)
    codes = [response["error_code"]] + [m["error_code"] for m in response["members"]]
    for code in map(as_error_code, codes):
        if code != ErrorCode.NONE:
            log.info("group %s: LeaveGroup answered %s", group_id, code.name)
