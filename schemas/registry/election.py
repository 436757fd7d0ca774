"""Leader election among registry instances sharing one store, through the broker's group
coordinator (Kafka's classic group protocol, protocol type "sr", as Confluent's registry).

Every instance joins the group (``schema.registry.group.id``) with its identity as member
metadata: JSON ``{"version", "host", "port", "scheme", "leader_eligibility"}``. The group's
leader (Kafka's: the member the coordinator picks) chooses the registry's leader with
``choose_leader`` and hands every member the same assignment in SyncGroup: JSON
``{"version", "error", "leader", "leader_identity"}``. Each member then tells its
``Registry`` who leads (``set_leader``); before rejoining (a rebalance) it forgets the
leader, so no instance writes while the group is changing.

The bytes travel through our client library's group membership (JoinGroup, SyncGroup,
heartbeats, LeaveGroup: broker/client/group/membership.py, heartbeat.py); this module
decides only what the "sr" protocol says.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass

from broker.client.cluster import ClusterMetadata
from broker.client.group.heartbeat import HeartbeatThread
from broker.client.group.membership import Generation, GroupMembership, MemberState
from broker.client.security import SecurityConfig
from broker.protocol.errors import KafkaError

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "sr"
PROTOCOL_NAME = "v0"
VERSION = 1
# SyncGroup's assignment error: two members announced the same URL, so forwarding to
# "the leader" would be ambiguous; nobody leads until the operator fixes host.name.
NO_ERROR, DUPLICATE_URLS = 0, 1


@dataclass(frozen=True)
class Identity:
    """How other instances reach this one, and whether it may lead."""

    host: str
    port: int
    scheme: str = "http"
    leader_eligibility: bool = True

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def document(self) -> dict:
        return {
            "version": VERSION,
            "host": self.host,
            "port": self.port,
            "scheme": self.scheme,
            "leader_eligibility": self.leader_eligibility,
        }

    def encode(self) -> bytes:
        return json.dumps(self.document()).encode()

    @classmethod
    def from_document(cls, doc: object) -> Identity:
        """Raises ValueError for anything that is not a member identity."""
        if not isinstance(doc, dict):
            raise ValueError(f"expected a JSON object, got {doc!r}")
        host, port, scheme = doc.get("host"), doc.get("port"), doc.get("scheme", "http")
        eligible = doc.get("leader_eligibility", True)
        if not isinstance(host, str) or not host or not isinstance(port, int):
            raise ValueError(f"identity without host and port: {doc!r}")
        if not isinstance(scheme, str) or not isinstance(eligible, bool):
            raise ValueError(f"identity with a bad scheme or eligibility: {doc!r}")
        return cls(host, port, scheme, eligible)

    @classmethod
    def decode(cls, raw: bytes) -> Identity:
        return cls.from_document(json.loads(raw))

    def __str__(self) -> str:
        return self.url if self.leader_eligibility else f"{self.url} (not eligible)"


@dataclass(frozen=True)
class Assignment:
    """What SyncGroup tells every member: who leads (``leader`` is its member id)."""

    error: int
    leader: str | None
    leader_identity: Identity | None

    def encode(self) -> bytes:
        identity = self.leader_identity
        return json.dumps(
            {
                "version": VERSION,
                "error": self.error,
                "leader": self.leader,
                "leader_identity": identity.document() if identity else None,
            }
        ).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Assignment:
        """Raises ValueError for bytes that are not an assignment."""
        doc = json.loads(raw)
        if not isinstance(doc, dict) or not isinstance(doc.get("error"), int):
            raise ValueError(f"not an sr assignment: {raw[:200]!r}")
        identity = doc.get("leader_identity")
        return cls(
            doc["error"],
            doc.get("leader"),
            None if identity is None else Identity.from_document(identity),
        )


def choose_leader(members: dict[str, Identity], previous: Identity | None) -> Assignment:
    """The registry's leader among ``members`` (member id -> identity): the previous leader
    if it is still there and eligible (a member joining does not move the leadership),
    else the eligible member with the smallest URL; none when no member is eligible."""
    urls = [m.url for m in members.values()]
    duplicates = sorted({u for u in urls if urls.count(u) > 1})
    if duplicates:
        log.error("registry instances share URLs %s: no leader until host.name differs", duplicates)
        return Assignment(DUPLICATE_URLS, None, None)
    eligible = sorted(
        ((ident.url, member) for member, ident in members.items() if ident.leader_eligibility)
    )
    if not eligible:
        return Assignment(NO_ERROR, None, None)
    chosen = next((m for _, m in eligible if members[m] == previous), eligible[0][1])
    return Assignment(NO_ERROR, chosen, members[chosen])


class ElectionHooks:
    """The "sr" protocol's side of a rebalance (membership.GroupHooks)."""

    protocol_type = PROTOCOL_TYPE

    def __init__(self, registry, identity: Identity) -> None:
        self.registry = registry
        self.identity = identity
        self.last_leader: Identity | None = None
        self.decided = threading.Event()  # set by the first assignment this member gets

    def join_protocols(self) -> list[dict]:
        return [{"name": PROTOCOL_NAME, "metadata": self.identity.encode()}]

    def on_join_prepare(self, generation: Generation, lost: bool) -> None:
        self.registry.set_leader(None)  # nobody writes while the group changes

    def perform_assignment(self, protocol: str, members: list[dict]) -> dict[str, bytes]:
        identities: dict[str, Identity] = {}
        for member in members:
            try:
                identities[member["member_id"]] = Identity.decode(member["metadata"])
            except ValueError as exc:
                log.warning("member %s sent no usable identity (%s)", member["member_id"], exc)
        assignment = choose_leader(identities, self.last_leader).encode()
        return {member["member_id"]: assignment for member in members}

    def on_join_complete(self, generation: Generation, assignment: bytes) -> None:
        self.decided.set()
        try:
            decided = Assignment.decode(assignment)
        except ValueError as exc:
            log.error("unreadable leader assignment (%s): no leader known", exc)
            return
        if decided.error != NO_ERROR:
            log.error("the election failed (error %d): no leader known", decided.error)
            return
        if decided.leader_identity is None:
            log.warning("no eligible registry instance in the group: writes fail until one joins")
        self.last_leader = decided.leader_identity
        self.registry.set_leader(decided.leader_identity, generation.generation_id)


class LeaderElector:
    """Keeps this instance in the group: a polling thread (joins and rejoins) and the
    client library's heartbeat thread."""

    POLL_S = 0.5

    def __init__(
        self,
        registry,
        identity: Identity,
        bootstrap_servers: list[str],
        group_id: str,
        *,
        session_timeout_ms: int,
        request_timeout_ms: int,
        security: SecurityConfig | None = None,
    ) -> None:
        self.hooks = ElectionHooks(registry, identity)
        self.security = security  # the store's connection security (kafkastore.*)
        self.registry = registry
        self.bootstrap_servers = bootstrap_servers
        self.config = {
            "group.id": group_id,
            "group.instance.id": None,
            "client.id": f"schema-registry-{identity.host}-{identity.port}",
            "session.timeout.ms": session_timeout_ms,
            # How long the coordinator waits for every member to rejoin: members rejoin
            # as soon as a heartbeat tells them, so a session's worth is plenty.
            "max.poll.interval.ms": session_timeout_ms + request_timeout_ms,
            "heartbeat.interval.ms": max(session_timeout_ms // 3, 100),
            "request.timeout.ms": request_timeout_ms,
            "retry.backoff.ms": 100,
        }
        self._closed = threading.Event()
        self._membership: GroupMembership | None = None
        self._thread = threading.Thread(target=self._run, name="registry-election", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        membership = None
        while membership is None and not self._closed.is_set():
            try:
                cluster = ClusterMetadata(
                    self.bootstrap_servers,
                    self.config["client.id"],
                    self.config["request.timeout.ms"] / 1000,
                    self.security,
                )
                membership = GroupMembership(cluster, self.config, self.hooks)
            except KafkaError as exc:
                log.warning("cannot reach the broker for the election, retrying: %s", exc)
                self._closed.wait(1.0)
        if membership is None:
            return
        self._membership = membership
        heartbeat = HeartbeatThread(membership, self.config["max.poll.interval.ms"])
        heartbeat.start()
        while not self._closed.is_set():
            membership.last_poll = time.monotonic()
            try:
                joined = membership.ensure_active_group(time.monotonic() + self.POLL_S)
                if not joined and membership.member_standing()[1] != MemberState.STABLE:
                    # Out of the group (a session timed out, the coordinator unreachable):
                    # another instance may be elected meanwhile, so this one stops leading.
                    self.registry.set_leader(None)
            except Exception as exc:  # noqa: BLE001 - the thread must outlive any one failure
                log.warning(
                    "election: %r; trying again", exc, exc_info=not isinstance(exc, KafkaError)
                )
                self.registry.set_leader(None)
                self._closed.wait(1.0)
                continue
            with membership.lock:
                if not membership.rejoin_needed and not self._closed.is_set():
                    membership.changed.wait(self.POLL_S)

    def wait_for_election(self, timeout_ms: int) -> bool:
        """Whether this member got its first assignment within ``timeout_ms``."""
        return self.hooks.decided.wait(timeout_ms / 1000)

    def close(self) -> None:
        """Leave the group, so another instance leads without waiting for a session timeout."""
        self._closed.set()
        membership = self._membership
        if membership is not None:
            with membership.lock:
                membership.changed.notify_all()
        self._thread.join(timeout=10)
        if membership is not None:
            try:
                membership.leave_group("registry shutting down")
            except KafkaError as exc:
                log.info("LeaveGroup failed: %s", exc)
            membership.close()
            membership.cluster.close()
