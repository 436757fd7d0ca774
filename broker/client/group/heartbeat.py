"""The heartbeat thread, as Kafka's Java client runs it: it keeps the member in its group
while the application processes records between polls.

While the member is STABLE it sends a Heartbeat every heartbeat.interval.ms on a
connection of its own to the coordinator (the polling thread's connection may be held
by a long fetch). It also watches two clocks:
- max.poll.interval.ms without a poll(): the application is stuck, so the member gives
  its partitions up: a dynamic member sends LeaveGroup (a static one just stops, and its
  session timeout ends its membership); either way the next poll() rejoins;
- session.timeout.ms without a successful heartbeat: the coordinator has surely removed
  the member, so it forgets its member id and rejoins (as librdkafka does).
Answers are handled as membership.py says; they only count for the generation they were
sent in. The thread finds the coordinator itself when it is unknown, so a coordinator
that moves does not cost a member that is busy between polls its membership.
"""

from __future__ import annotations

import logging
import threading
import time

from broker.client.connection import UNREACHABLE, BrokerConnection
from broker.client.coordinator import find_coordinator
from broker.client.group.membership import (
    REDISCOVER,
    GroupMembership,
    MemberState,
    send_leave_group,
)
from broker.cluster import Node
from broker.protocol.apis import HEARTBEAT
from broker.protocol.errors import (
    ErrorCode,
    KafkaError,
    as_error_code,
    error_for,
)

log = logging.getLogger(__name__)


class HeartbeatThread(threading.Thread):
    def __init__(self, membership: GroupMembership, max_poll_interval_ms: int):
        super().__init__(name=f"heartbeat-{membership.group_id}", daemon=True)
        self.m = membership
        self.max_poll_interval_s = max_poll_interval_ms / 1000
        self.session_timeout_s = membership.session_timeout_ms / 1000
        self._conn: BrokerConnection | None = None
        self._conn_for: Node | None = None
        self._next_at = 0.0

    def run(self) -> None:
        try:
            while self._step():
                pass
        finally:
            self._close()

    def _step(self) -> bool:
        """One decision and at most one request; False once the consumer is closed."""
        m = self.m
        with m.lock:
            while not m.closed and (m.state != MemberState.STABLE or m.fatal is not None):
                m.changed.wait()
                self._next_at = time.monotonic() + m.heartbeat_interval_s
            if m.closed:
                return False
            now = time.monotonic()
            coordinator, generation = m.coordinator, m.generation
            if coordinator is not None and now - m.last_heartbeat_ok > self.session_timeout_s:
                m.coordinator_dead(
                    coordinator, "no successful heartbeat within the session timeout"
                )
                m.reset_generation(keep_member_id=False, reason="session timed out")
                return True
            poll_expired = now - m.last_poll > self.max_poll_interval_s
            if not poll_expired and coordinator is not None and now < self._next_at:
                m.changed.wait(self._next_at - now)
                return True
        if coordinator is None:
            self._discover()
        elif poll_expired:
            self._leave_after_poll_timeout(coordinator, generation)
        else:
            self._heartbeat(coordinator, generation)
        return True

    def _discover(self) -> None:
        m = self.m
        for broker in list(m.cluster.brokers.values()):
            try:
                with m.cluster.open_connection(
                    broker.host, broker.port, m.request_timeout_s
                ) as conn:
                    coordinator = find_coordinator(conn, m.group_id)
            except KafkaError as exc:
                if not (exc.retriable or isinstance(exc, UNREACHABLE)):
                    log.info("group %s: FindCoordinator: %s", m.group_id, exc)
                continue
            with m.lock:
                if m.coordinator is None:
                    m.coordinator = coordinator
            return
        self._wait(m.retry_backoff_s)

    def _leave_after_poll_timeout(self, coordinator: Node, generation) -> None:
        m = self.m
        log.warning(
            "group %s: no poll() for max.poll.interval.ms (%d ms): leaving the group; the "
            "next poll() rejoins",
            m.group_id,
            int(self.max_poll_interval_s * 1000),
        )
        if m.instance_id is None and generation.member_id:
            try:
                send_leave_group(
                    self._connection(coordinator),
                    m.group_id,
                    generation.member_id,
                    "consumer poll timeout has expired",
                )
            except KafkaError as exc:
                log.info("group %s: LeaveGroup failed: %s", m.group_id, exc)
                self._close()
        with m.lock:
            if m.generation == generation:
                m.reset_generation(keep_member_id=False, reason="poll timeout")

    def _heartbeat(self, coordinator: Node, generation) -> None:
        m = self.m
        body = {
            "group_id": m.group_id,
            "generation_id": generation.generation_id,
            "member_id": generation.member_id,
            "group_instance_id": m.instance_id,
        }
        sent = time.monotonic()
        try:
            code = as_error_code(
                self._connection(coordinator).request(HEARTBEAT, body)["error_code"]
            )
        except KafkaError as exc:  # unreachable, or the broker offers no Heartbeat
            self._close()
            m.coordinator_dead(coordinator, f"heartbeat: {exc}")
            self._next_at = sent + m.retry_backoff_s
            return
        with m.lock:
            if m.generation != generation or m.state != MemberState.STABLE:
                return  # the answer of a generation the member has moved on from
            self._next_at = sent + m.heartbeat_interval_s
            if code in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS):
                m.last_heartbeat_ok = sent  # a rebalance answer proves membership too
            if code == ErrorCode.NONE:
                return
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                m.request_rejoin("the group is rebalancing")
            elif code == ErrorCode.ILLEGAL_GENERATION:
                m.reset_generation(keep_member_id=True, reason="heartbeat: ILLEGAL_GENERATION")
            elif code == ErrorCode.UNKNOWN_MEMBER_ID:
                m.reset_generation(keep_member_id=False, reason="heartbeat: UNKNOWN_MEMBER_ID")
            elif code == ErrorCode.FENCED_INSTANCE_ID:
                m.set_fatal(error_for(code, f"group.instance.id {m.instance_id!r} was taken over"))
            elif code in REDISCOVER:
                m.coordinator_dead(coordinator, f"heartbeat: {code.name}")
                self._next_at = sent + m.retry_backoff_s
            else:  # COORDINATOR_LOAD_IN_PROGRESS or unexpected: try again soon
                log.info("group %s: heartbeat answered %s", m.group_id, code.name)
                self._next_at = sent + m.retry_backoff_s

    def _connection(self, coordinator: Node) -> BrokerConnection:
        if self._conn is None or self._conn.closed or self._conn_for != coordinator:
            self._close()
            m = self.m
            self._conn = m.cluster.open_connection(
                coordinator.host, coordinator.port, m.request_timeout_s
            )
            self._conn_for = coordinator
        return self._conn

    def _wait(self, seconds: float) -> None:
        with self.m.lock:
            if not self.m.closed:
                self.m.changed.wait(seconds)

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self._conn_for = None
