"""Committed offsets: OffsetCommit and OffsetFetch to the group's coordinator.

A member commits with its generation and member id (and instance id), so the
coordinator refuses commits of a member that is no longer in the group; commits outside
group management (assign()) go with generation -1 and member id "". Each offset carries
the leader epoch of the last consumed record (OffsetCommit v6+, KIP-320).

Errors, as Kafka's client handles them: coordinator errors and broken connections find
the coordinator again and retry (synchronous commits, until their deadline);
COORDINATOR_LOAD_IN_PROGRESS and UNKNOWN_TOPIC_OR_PARTITION retry; UNKNOWN_MEMBER_ID and
ILLEGAL_GENERATION put the member out of the group and REBALANCE_IN_PROGRESS makes it
rejoin: all three raise CommitFailedError; FENCED_INSTANCE_ID is fatal; the rest raise
their error. Asynchronous commits are not retried: their future (and callback) get the
error.

`commit_async` sends at once and reads the answer on a later poll(): the connection
answers in order, so the answer waits there until read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import NamedTuple

from broker.client.connection import UNREACHABLE, BrokerConnection
from broker.client.group.errors import CommitFailedError
from broker.client.group.membership import (
    NO_GENERATION,
    REDISCOVER,
    Generation,
    GroupMembership,
)
from broker.cluster import Node, TopicPartition
from broker.protocol.apis import OFFSET_COMMIT, OFFSET_FETCH
from broker.protocol.errors import (
    ErrorCode,
    KafkaError,
    RequestTimedOutError,
    as_error_code,
    error_for,
)

log = logging.getLogger(__name__)
_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
_OUT_OF_GROUP = frozenset(
    {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS}
)


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


CommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], Exception | None], None]


class _InFlight(NamedTuple):
    conn: BrokerConnection
    coordinator: Node
    correlation_id: int
    offsets: dict[TopicPartition, OffsetAndMetadata]
    generation: Generation
    future: Future
    callback: CommitCallback | None


class _Again(Exception):
    """Retriable: send the commit (or fetch) again after a backoff."""


class GroupOffsets:
    """Commits and committed offsets of one group, through its membership's coordinator."""

    def __init__(
        self,
        membership: GroupMembership,
        group_managed: Callable[[], bool],
        require_stable: bool = False,
    ):
        self.m = membership
        self._group_managed = group_managed  # subscribe() (commit as a member) or assign()
        # OffsetFetch v7: partitions with commits pending in a transaction answer
        # UNSTABLE_OFFSET_COMMIT, asked again until the transaction ends.
        self.require_stable = require_stable
        self._in_flight: list[_InFlight] = []

    # --- commit ---------------------------------------------------------------------

    def _generation(self) -> Generation:
        if not self._group_managed():
            return NO_GENERATION
        generation, _ = self.m.member_standing()
        if not generation.valid:
            raise CommitFailedError(
                ErrorCode.REBALANCE_IN_PROGRESS,
                "this member is not in the group right now (joining or rejoining)",
            )
        return generation

    def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], deadline: float) -> None:
        """Commit and wait for the answer; retriable failures retried until `deadline`."""
        self.complete_async()
        if not offsets:
            return
        while True:
            generation = self._generation()
            found = self.m.coordinator_connection(deadline)
            if found is None:
                raise RequestTimedOutError(f"no coordinator for group {self.m.group_id!r} in time")
            conn, coordinator = found
            try:
                body = self._commit_body(generation, offsets)
                response = conn.request(OFFSET_COMMIT, body)
                self._check_commit(response, coordinator, generation)
                return
            except UNREACHABLE as exc:
                self.m.close_connection()
                self.m.coordinator_dead(coordinator, f"OffsetCommit: {exc}")
                last = exc
            except _Again as exc:
                last = exc
            if time.monotonic() + self.m.retry_backoff_s > deadline:
                raise RequestTimedOutError(f"commit of group {self.m.group_id!r}: {last}")
            time.sleep(self.m.retry_backoff_s)

    def commit_async(
        self,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        callback: CommitCallback | None = None,
    ) -> Future:
        """Send a commit now; the future (and callback) complete on a later poll()."""
        future: Future = Future()
        try:
            generation = self._generation()
            found = self.m.coordinator_connection(time.monotonic())
            if found is None:
                raise error_for(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"group {self.m.group_id!r}")
            conn, coordinator = found
            cid = conn.send(OFFSET_COMMIT, self._commit_body(generation, offsets))
        except KafkaError as exc:
            _finish(future, callback, offsets, exc)
            return future
        self._in_flight.append(
            _InFlight(conn, coordinator, cid, dict(offsets), generation, future, callback)
        )
        return future

    def complete_async(self) -> None:
        """Read the answers of the asynchronous commits sent so far."""
        in_flight, self._in_flight = self._in_flight, []
        for c in in_flight:
            error: Exception | None = None
            try:
                self._check_commit(c.conn.receive(c.correlation_id), c.coordinator, c.generation)
            except UNREACHABLE as exc:
                self.m.coordinator_dead(c.coordinator, f"OffsetCommit: {exc}")
                error = exc
            except _Again as exc:
                error = error_for(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, str(exc))
            except KafkaError as exc:
                error = exc
            _finish(c.future, c.callback, c.offsets, error)

    def _commit_body(self, generation: Generation, offsets) -> dict:
        topics: dict[str, list[dict]] = {}
        for tp, om in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": om.offset,
                    "committed_leader_epoch": om.leader_epoch,
                    "committed_metadata": om.metadata,
                }
            )
        return {
            "group_id": self.m.group_id,
            "generation_id_or_member_epoch": generation.generation_id,
            "member_id": generation.member_id,
            "group_instance_id": self.m.instance_id if generation.valid else None,
            "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }

    def _check_commit(self, response: dict, coordinator: Node, generation) -> None:
        """Raise for the first failed partition of an OffsetCommit answer."""
        for t in response["topics"]:
            for p in t["partitions"]:
                code = as_error_code(p["error_code"])
                if code == ErrorCode.NONE:
                    continue
                where = f"{t['name']}-{p['partition_index']}"
                if code in REDISCOVER:
                    self.m.close_connection()
                    self.m.coordinator_dead(coordinator, f"OffsetCommit: {code.name}")
                    raise _Again(f"{where}: {code.name}")
                if code in _RETRY:
                    raise _Again(f"{where}: {code.name}")
                if code in _OUT_OF_GROUP:
                    self._out_of_group(code, generation)
                    raise CommitFailedError(code, f"{where}: {code.name}")
                error = error_for(code, f"commit of {where}")
                if code == ErrorCode.FENCED_INSTANCE_ID:
                    self.m.set_fatal(error)
                raise error

    def _out_of_group(self, code: ErrorCode, generation: Generation) -> None:
        current, _ = self.m.member_standing()
        if current != generation:
            return  # the member has moved on already
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.m.request_rejoin("a commit found the group rebalancing")
        else:
            self.m.reset_generation(code == ErrorCode.ILLEGAL_GENERATION, f"commit: {code.name}")

    # --- committed offsets ------------------------------------------------------------

    def committed(
        self, partitions: list[TopicPartition], deadline: float
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (None where nothing is committed)."""
        if not partitions:
            return {}
        while True:
            found = self.m.coordinator_connection(deadline)
            if found is None:
                raise RequestTimedOutError(f"no coordinator for group {self.m.group_id!r} in time")
            conn, coordinator = found
            try:
                return self._fetch_once(conn, coordinator, partitions)
            except UNREACHABLE as exc:
                self.m.close_connection()
                self.m.coordinator_dead(coordinator, f"OffsetFetch: {exc}")
                last: Exception = exc
            except _Again as exc:
                last = exc
            if time.monotonic() + self.m.retry_backoff_s > deadline:
                raise RequestTimedOutError(f"committed offsets of {self.m.group_id!r}: {last}")
            time.sleep(self.m.retry_backoff_s)

    def _fetch_version(self, conn) -> int | None:
        """require_stable needs OffsetFetch v7, above what the consumer sends otherwise
        (connection.py: CLIENT_VERSIONS); where the broker lacks it the field goes
        unsent, as Kafka's consumer does with older brokers."""
        if self.require_stable and conn.versions.get(OFFSET_FETCH, (0, 0))[1] >= 7:
            return 7
        return None

    def _fetch_once(self, conn, coordinator, partitions) -> dict:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = {
            "group_id": self.m.group_id,
            "topics": [{"name": t, "partition_indexes": sorted(ps)} for t, ps in by_topic.items()],
            "require_stable": self.require_stable,
        }
        response = conn.request(OFFSET_FETCH, body, self._fetch_version(conn))
        code = as_error_code(response["error_code"])
        if code in REDISCOVER:
            self.m.close_connection()
            self.m.coordinator_dead(coordinator, f"OffsetFetch: {code.name}")
            raise _Again(code.name)
        if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            raise _Again(code.name)
        if code != ErrorCode.NONE:
            raise error_for(code, f"committed offsets of group {self.m.group_id!r}")
        out: dict[TopicPartition, OffsetAndMetadata | None] = dict.fromkeys(partitions)
        for t in response["topics"]:
            for p in t["partitions"]:
                tp = TopicPartition(t["name"], p["partition_index"])
                code = as_error_code(p["error_code"])
                if code == ErrorCode.UNSTABLE_OFFSET_COMMIT:
                    raise _Again(f"{tp.topic}-{tp.partition}: {code.name}")
                if code not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    raise error_for(code, f"committed offset of {tp.topic}-{tp.partition}")
                if code == ErrorCode.NONE and p["committed_offset"] >= 0:
                    out[tp] = OffsetAndMetadata(
                        p["committed_offset"], p["metadata"] or "", p["committed_leader_epoch"]
                    )
        return out


def _finish(future: Future, callback, offsets, error: Exception | None) -> None:
    if error is None:
        future.set_result(offsets)
    else:
        future.set_exception(error)
    if callback is not None:
        try:
            callback(offsets, error)
        except Exception:
            log.exception("commit callback failed")
