"""GroupConsumer: the consumer of Kafka's group design in our client library.

    with GroupConsumer("127.0.0.1:9092", group_id="loaders") as consumer:
        consumer.subscribe(["events"])            # or subscribe(pattern="events-.*")
        while running:
            for record in consumer.poll(1.0):     # ConsumerRecord(topic, partition, offset, ...)
                handle(record)

poll() does the group's work on the caller's thread: it joins or rejoins the group when
needed (calling the rebalance listener), commits automatically, initialises positions
(the committed offset, else auto.offset.reset) and fetches. A background thread only
heartbeats (heartbeat.py). assign() takes partitions by hand instead of subscribing: no
group membership, commits go with generation -1.

Not thread-safe, as Kafka's consumer: one thread calls it (the heartbeat thread shares
only the membership's state, under its lock).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import NamedTuple

from broker.client.group.assignors import make_assignors, rebalance_protocol
from broker.client.group.config import consumer_config
from broker.client.group.errors import NoOffsetForPartitionError
from broker.client.group.fetcher import ConsumerRecord, Fetcher
from broker.client.group.heartbeat import HeartbeatThread
from broker.client.group.membership import GroupMembership
from broker.client.group.offsets import CommitCallback, GroupOffsets, OffsetAndMetadata
from broker.client.group.rebalance import ConsumerRebalance
from broker.client.group.subscription import Mode, RebalanceListener, SubscriptionState
from broker.client.security import SecurityConfig
from broker.client.simple_consumer import SimpleConsumer
from broker.cluster import TopicPartition
from broker.protocol.errors import ErrorCode, KafkaError, NetworkError, error_for

log = logging.getLogger(__name__)


class GroupMetadata(NamedTuple):
    """The member's standing in its group, as Java's ConsumerGroupMetadata: generation -1
    and member id "" while it is not in the group."""

    group_id: str | None
    generation_id: int
    member_id: str
    group_instance_id: str | None


class GroupConsumer:
    """See the module docstring; settings are CONSUMER_CONFIG's keys in snake_case."""

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        security: SecurityConfig | None = None,
        **settings,
    ):
        self.config = config = consumer_config(settings)
        assignors = make_assignors(config["partition.assignment.strategy"])
        self.protocol = rebalance_protocol(assignors)
        self._request_timeout_s = config["request.timeout.ms"] / 1000
        self._simple = SimpleConsumer(
            bootstrap_servers,
            config["client.id"],
            self._request_timeout_s,
            security,
            config["isolation.level"],
        )
        self.cluster = self._simple.cluster
        self._subscription = SubscriptionState(config["exclude.internal.topics"])
        self._fetcher = Fetcher(self._simple, self._subscription, config)
        self._rebalance = ConsumerRebalance(
            self._subscription,
            assignors,
            self.protocol,
            self.cluster,
            config["client.rack"],
            self._commit_before_rebalance,
        )
        self._membership: GroupMembership | None = None
        self._offsets: GroupOffsets | None = None
        self._heartbeat: HeartbeatThread | None = None
        if config["group.id"] is not None:
            self._membership = GroupMembership(self.cluster, config, self._rebalance)
            self._rebalance.membership = self._membership
            self._offsets = GroupOffsets(
                self._membership,
                lambda: self._subscription.subscribed,
                # KIP-447: a read_committed member starts from settled offsets only.
                require_stable=config["isolation.level"] == "read_committed",
            )
        now = time.monotonic()
        self._next_auto_commit = now + config["auto.commit.interval.ms"] / 1000
        self._next_metadata = now + config["metadata.max.age.ms"] / 1000
        self._closed = False

    # --- what to consume ----------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | str | None = None,
        pattern: str | re.Pattern | None = None,
        listener: RebalanceListener | None = None,
    ) -> None:
        """Consume `topics`, or every topic `pattern` matches in full (re-evaluated at each
        metadata refresh), as a member of the group; partitions come from rebalances."""
        self._check_open()
        membership = self._require_group("subscribe()")
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() takes topics or a pattern, not both or neither")
        if pattern is not None:
            self._subscription.subscribe_pattern(pattern, listener)
            self.cluster.refresh()
            self._subscription.topics = self._subscription.matching(self.cluster.topics)
        else:
            topics = [topics] if isinstance(topics, str) else list(topics)
            self._subscription.subscribe(topics, listener)
            self.cluster.refresh(sorted(self._subscription.topics))
        membership.request_rejoin("subscription changed")
        if self._heartbeat is None:
            self._heartbeat = HeartbeatThread(membership, self.config["max.poll.interval.ms"])
            self._heartbeat.start()

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Consume exactly these partitions, outside group management."""
        self._check_open()
        self._subscription.assign_manually(partitions)

    def unsubscribe(self) -> None:
        """Give up the subscription (leaving the group) or the manual assignment."""
        self._check_open()
        if self._subscription.subscribed and self._membership is not None:
            self._give_up_partitions()
            self._membership.leave_group("unsubscribed")
        self._subscription.unsubscribe()

    def assignment(self) -> set[TopicPartition]:
        return set(self._subscription.assignment)

    def subscription(self) -> set[str]:
        return set(self._subscription.topics) if self._subscription.subscribed else set()

    def group_metadata(self) -> GroupMetadata:
        if self._membership is None:
            return GroupMetadata(None, -1, "", None)
        generation, _ = self._membership.member_standing()
        return GroupMetadata(
            self._membership.group_id,
            generation.generation_id,
            generation.member_id,
            self._membership.instance_id,
        )

    # --- poll -------------------------------------------------------------------------

    def poll(self, timeout_s: float = 0.0) -> list[ConsumerRecord]:
        """Records from the assigned partitions, at most max.poll.records, waiting up to
        `timeout_s` for some. A rebalance under way is completed first (however long the
        coordinator holds it)."""
        self._check_open()
        if self._subscription.mode == Mode.NONE:
            raise ValueError("poll() needs subscribe() or assign() first")
        deadline = time.monotonic() + max(0.0, timeout_s)
        if self._membership is not None:
            self._membership.last_poll = time.monotonic()
            self._membership.raise_if_fatal()
        if self._offsets is not None:
            self._offsets.complete_async()
        max_records = self.config["max.poll.records"]
        while True:
            if self._subscription.subscribed:
                self._maybe_refresh_metadata()
                joined = self._membership.ensure_active_group(deadline)
                self._rebalance.raise_listener_error()
                if not joined:
                    return []
            self._maybe_auto_commit()
            self._init_positions()
            records = self._fetcher.drain(max_records)
            if records:
                return records
            remaining = deadline - time.monotonic()
            if not self._subscription.assignment:
                if remaining <= 0:
                    return []
                self._wait(min(remaining, self.config["fetch.max.wait.ms"] / 1000))
                continue
            max_wait_ms = int(max(0.0, min(self.config["fetch.max.wait.ms"], remaining * 1000)))
            try:
                out_of_range = self._fetcher.fetch(max_wait_ms, max(remaining, 0.0))
            except NetworkError as exc:
                log.info("fetch failed, retrying on the next round: %s", exc)
                out_of_range = []
            self._reset_out_of_range(out_of_range)
            records = self._fetcher.drain(max_records)
            if records or time.monotonic() >= deadline:
                return records

    def _wait(self, seconds: float) -> None:
        if self._membership is None:
            time.sleep(seconds)
            return
        with self._membership.lock:
            if not self._membership.rejoin_needed:
                self._membership.changed.wait(seconds)

    def _maybe_refresh_metadata(self) -> None:
        now = time.monotonic()
        if now < self._next_metadata:
            return
        self._next_metadata = now + self.config["metadata.max.age.ms"] / 1000
        try:
            self.cluster.refresh(self._rebalance.metadata_topics())
        except NetworkError as exc:
            log.info("metadata refresh failed: %s", exc)
            return
        reason = self._rebalance.metadata_changed()
        if reason is not None:
            self._membership.request_rejoin(reason)

    # --- positions --------------------------------------------------------------------

    def _init_positions(self) -> None:
        """Positions for partitions without one: the committed offset, else the reset policy."""
        missing = {tp: s for tp, s in self._subscription.assignment.items() if s.position is None}
        if not missing:
            return
        lookup = [tp for tp, s in missing.items() if s.reset is None]
        committed = {}
        if lookup and self._offsets is not None:
            deadline = time.monotonic() + self._request_timeout_s
            committed = self._offsets.committed(lookup, deadline)
        unset = []
        for tp, state in missing.items():
            found = committed.get(tp) if state.reset is None else None
            if found is not None:
                state.position, state.leader_epoch = found.offset, found.leader_epoch
            else:
                unset.append(tp)
        self._reset_positions(unset)

    def _reset_positions(self, partitions: list[TopicPartition]) -> None:
        default = self.config["auto.offset.reset"]
        for tp in partitions:
            state = self._subscription.assignment[tp]
            strategy = state.reset or default
            if strategy == "none":
                raise NoOffsetForPartitionError([tp])
            if strategy == "earliest":
                state.position = self._simple.earliest_offset(tp.topic, tp.partition)
            else:
                state.position = self._simple.latest_offset(tp.topic, tp.partition)
            state.leader_epoch, state.reset = -1, None

    def _reset_out_of_range(self, partitions: list[TopicPartition]) -> None:
        if not partitions:
            return
        if self.config["auto.offset.reset"] == "none":
            names = ", ".join(f"{t}-{p}" for t, p in partitions)
            raise error_for(ErrorCode.OFFSET_OUT_OF_RANGE, f"positions out of range: {names}")
        for tp in partitions:
            state = self._subscription.assignment[tp]
            log.info(
                "%s-%d: position %s out of range, resetting", tp.topic, tp.partition, state.position
            )
            state.position, state.reset = None, self.config["auto.offset.reset"]
        self._reset_positions(partitions)

    def position(self, partition: tuple[str, int]) -> int:
        """The offset of the next record poll() returns for an assigned partition."""
        self._check_open()
        tp = TopicPartition(*partition)
        state = self._subscription.state(tp)
        if state.position is None:
            self._init_positions()
        return state.position

    def seek(self, partition: tuple[str, int], offset: int) -> None:
        tp = TopicPartition(*partition)
        if offset < 0:
            raise ValueError(f"seek offset must be >= 0, not {offset}")
        state = self._subscription.state(tp)
        state.position, state.leader_epoch, state.reset = offset, -1, None
        self._fetcher.forget(tp)

    def seek_to_beginning(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        self._seek_to("earliest", partitions)

    def seek_to_end(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        self._seek_to("latest", partitions)

    def _seek_to(self, where: str, partitions) -> None:
        tps = self._subscription.assignment if partitions is None else partitions
        for tp in [TopicPartition(*p) for p in tps]:
            state = self._subscription.state(tp)
            state.position, state.leader_epoch, state.reset = None, -1, where
            self._fetcher.forget(tp)

    # --- offsets ----------------------------------------------------------------------

    def _consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {
            tp: OffsetAndMetadata(s.position, "", s.leader_epoch)
            for tp, s in self._subscription.assignment.items()
            if s.position is not None
        }

    def commit(
        self,
        offsets: Mapping[tuple[str, int], OffsetAndMetadata | int] | None = None,
        timeout_s: float | None = None,
    ) -> None:
        """Commit `offsets` (the next offsets to consume), or every assigned partition's
        position, and wait for the coordinator's answer. CommitFailedError when the member
        is no longer in the group."""
        self._check_open()
        self._require_group("commit()")
        timeout_s = self._request_timeout_s if timeout_s is None else timeout_s
        chosen = self._consumed() if offsets is None else _normalised(offsets)
        self._offsets.commit(chosen, time.monotonic() + timeout_s)

    def commit_async(
        self,
        offsets: Mapping[tuple[str, int], OffsetAndMetadata | int] | None = None,
        callback: CommitCallback | None = None,
    ) -> Future:
        """Send a commit without waiting; the future and `callback(offsets, error)`
        complete during a later poll() (or commit(), or close())."""
        self._check_open()
        self._require_group("commit_async()")
        chosen = self._consumed() if offsets is None else _normalised(offsets)
        return self._offsets.commit_async(chosen, callback)

    def committed(
        self, partitions: Iterable[tuple[str, int]], timeout_s: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of `partitions` (None: nothing committed)."""
        self._check_open()
        self._require_group("committed()")
        timeout_s = self._request_timeout_s if timeout_s is None else timeout_s
        tps = [TopicPartition(*p) for p in partitions]
        return self._offsets.committed(tps, time.monotonic() + timeout_s)

    def _commit_before_rebalance(self) -> None:
        if self.config["enable.auto.commit"] and self._offsets is not None:
            self._offsets.commit(self._consumed(), time.monotonic() + self._request_timeout_s)

    def _maybe_auto_commit(self) -> None:
        if not self.config["enable.auto.commit"] or self._offsets is None:
            return
        now = time.monotonic()
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self.config["auto.commit.interval.ms"] / 1000
        if self._subscription.subscribed and not self._membership.member_standing()[0].valid:
            return
        consumed = self._consumed()
        if consumed:
            self._offsets.commit_async(consumed, _log_failed_commit)

    # --- closing ------------------------------------------------------------------------

    def _give_up_partitions(self) -> None:
        """Revoke (in the group) or lose (out of it) every partition, with the callbacks."""
        owned = set(self._subscription.assignment)
        if owned:
            valid = self._membership.member_standing()[0].valid
            self._rebalance.call_listener(
                "on_partitions_revoked" if valid else "on_partitions_lost", owned
            )
        self._subscription.set_assignment([])

    def close(self, autocommit: bool = True) -> None:
        """Commit (auto commit), revoke the partitions, leave the group (a dynamic member),
        stop the heartbeat thread and close the connections."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._offsets is not None:
                self._offsets.complete_async()
                if autocommit and self.config["enable.auto.commit"]:
                    try:
                        if (
                            not self._subscription.subscribed
                            or self._membership.member_standing()[0].valid
                        ):
                            self._offsets.commit(
                                self._consumed(), time.monotonic() + self._request_timeout_s
                            )
                    except KafkaError as exc:
                        log.warning("commit on close failed: %s", exc)
            if self._subscription.subscribed and self._membership is not None:
                self._give_up_partitions()
                self._membership.leave_group("consumer closed")
        finally:
            if self._membership is not None:
                self._membership.close()
            if self._heartbeat is not None:
                self._heartbeat.join(self._request_timeout_s + 1)
            self._simple.close()

    def __enter__(self) -> GroupConsumer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("the consumer is closed")

    def _require_group(self, what: str) -> GroupMembership:
        if self._membership is None:
            raise error_for(ErrorCode.INVALID_GROUP_ID, f"{what} needs a group_id")
        return self._membership


def _normalised(offsets) -> dict[TopicPartition, OffsetAndMetadata]:
    out = {}
    for tp, value in offsets.items():
        om = OffsetAndMetadata(value) if isinstance(value, int) else OffsetAndMetadata(*value)
        if om.offset < 0:
            raise ValueError(f"cannot commit offset {om.offset} for {tp[0]}-{tp[1]}")
        out[TopicPartition(*tp)] = om
    return out


def _log_failed_commit(offsets, error: Exception | None) -> None:
    if error is not None:
        log.warning("auto commit of %d partitions failed: %s", len(offsets), error)
