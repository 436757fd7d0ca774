"""Followers copy their leaders' logs: one fetcher per (leader, fetcher index).

A partition handed to the fetchers (by the replica manager, on a LeaderAndIsr that makes
this broker a follower) first finds where its log diverges from the leader's: it asks
OffsetForLeaderEpoch for the end of its newest leader epoch and truncates there (KIP-101,
KIP-279), never blindly to its high watermark. Then it fetches from its log end with
Fetch(replica_id = this broker), appends whole batches, and takes the leader's high
watermark, capped by its own log end. Partitions of one leader share a fetcher (spread
over `num.replica.fetchers` by hash), so one request carries them all.

Each fetcher keeps a fetch session (KIP-227, broker/server/fetch_session.py) at its
leader: a full fetch opens it, then each fetch names only the partitions added or whose
fetch offset or epoch changed (appended to, truncated, resumed after an error) and
forgets those removed, truncating or paused; an idle fetcher's fetch names none. A session
error (the leader restarted, or evicted it) falls back to a full fetch. The loop keeps
these sets up to date as partitions change, so a fetch costs what changed, never a scan of
every partition followed.

A fetch asks for at most `replica.fetch.max.bytes` of each partition and
`replica.fetch.response.max.bytes` in all; the leader fills the answer in order
(docs/contracts/fetch.md, "Size limits"). Within a session the leader keeps that order
fair; a full fetch (opening a session, or without one when the leader's cache has no
slot) names first the partitions that went longest without records, as Kafka's fetcher
moves a partition that got data to the end, so a backlog on one partition never starves
the others.

A partition whose data cannot be taken (its append or truncation raises what no retry
mends, e.g. a batch below its log end from a leader at the same epoch) is failed alone,
as Kafka's fetcher marks it failed: it leaves its fetcher, is logged and counted
(`ReplicaFetcherManager.failed`), and waits for a LeaderAndIsr at a new leader epoch,
while the other partitions of that leader replicate on (docs/contracts/cluster.md,
"Replication", F3 in docs/faults.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from broker.cluster import Endpoint, TopicPartition
from broker.inter_broker import NodeClient
from broker.inter_broker.security import PLAINTEXT, InterBrokerSecurity
from broker.log.log import KafkaStorageError
from broker.protocol.apis import FETCH_API, OFFSET_FOR_LEADER_EPOCH_API
from broker.protocol.errors import ErrorCode, KafkaError, NetworkError, RequestTimedOutError
from broker.records.batch import CorruptRecordError
from broker.server.fetch_session import INITIAL_EPOCH, NO_SESSION, next_epoch
from broker.server.replication_quota import FOLLOWER_REPLICAS, ReplicationQuota, is_throttled

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1

# Errors after which a partition waits for the controller's next word (a LeaderAndIsr).
_WAIT_FOR_LEADERSHIP = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
}


@dataclass
class FetchState:
    leader_epoch: int


@dataclass(frozen=True)
class FetcherSettings:
    broker_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partition_max_bytes: int
    backoff_ms: int
    request_timeout_s: float
    num_fetchers: int = 1
    # How to reach the leaders: the inter-broker listener's TLS and SASL.
    security: InterBrokerSecurity = PLAINTEXT


class ReplicaFetcherManager:
    """The fetchers of this broker; the replica manager adds and removes partitions."""

    def __init__(
        self,
        replicas,
        settings: FetcherSettings,
        now_ms: Callable[[], int],
        quota: ReplicationQuota | None = None,
    ) -> None:
        self.replicas = replicas
        self.settings = settings
        self.now_ms = now_ms
        # Follower-side replication throttle (replication_quota.py); None: unthrottled.
        self.quota = quota
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._where: dict[TopicPartition, tuple[int, int]] = {}
        # Partitions failed and not fetched until a new leadership adds them (Kafka's
        # failedPartitions, its FailedPartitionsCount metric), with the error.
        self.failed: dict[TopicPartition, str] = {}

    def add(self, tp: TopicPartition, leader: int, address: tuple[str, int]) -> None:
        self.failed.pop(tp, None)  # a new leadership: tried again
        key = (leader, hash(tp) % self.settings.num_fetchers)
        if self._where.get(tp) not in (None, key):
            self.remove(tp)
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = ReplicaFetcher(self, leader, key[1], address)
            self.fetchers[key] = fetcher
            fetcher.start()
        elif fetcher.address != address:  # the leader restarted elsewhere
            fetcher.node.update_endpoint(_endpoint(address, self.settings.security))
            fetcher.address = address
        partition = self.replicas.get(*tp)
        fetcher.add(tp, partition.leader_epoch if partition is not None else -1)
        self._where[tp] = key

    def fail(self, tp: TopicPartition, error: BaseException) -> None:
        """`tp`'s fetched data could not be taken: it stops being fetched (the others go
        on) until the controller sends its next leadership."""
        partition = self.replicas.get(*tp)
        at = partition.log.log_end_offset if partition is not None else -1
        log.error(
            "%s-%d: replication stopped (failed partition) at offset %d: %s: %s",
            *tp,
            at,
            type(error).__name__,
            error,
        )
        self.remove(tp)
        self.failed[tp] = f"{type(error).__name__}: {error}"

    def remove(self, tp: TopicPartition) -> None:
        self.failed.pop(tp, None)
        key = self._where.pop(tp, None)
        if key is None:
            return
        fetcher = self.fetchers.get(key)
        if fetcher is not None:
            fetcher.remove(tp)
            if not fetcher.partitions:
                del self.fetchers[key]
                fetcher.stop()

    async def shutdown(self) -> None:
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        self._where.clear()
        for fetcher in fetchers:
            fetcher.stop()
        await asyncio.gather(*(f.task for f in fetchers if f.task), return_exceptions=True)

    def lag(self) -> dict[TopicPartition, int]:
        """Per followed partition: the leader's high watermark minus our log end, as last
        seen (what a "follower lag" benchmark or metric reads)."""
        return {
            tp: fetcher.last_leader_hw.get(tp, 0) - self.replicas.get(*tp).log.log_end_offset
            for fetcher in self.fetchers.values()
            for tp in fetcher.partitions
            if self.replicas.get(*tp) is not None
        }


def _endpoint(address: tuple[str, int], security: InterBrokerSecurity) -> Endpoint:
    # LeaderAndIsr names a leader's address on the inter-broker listener, not the listener.
    return Endpoint(security.listener, address[0], address[1], security.protocol)


class ReplicaFetcher:
    def __init__(self, manager: ReplicaFetcherManager, leader: int, index: int, address) -> None:
        self.manager = manager
        self.leader = leader
        self.index = index
        self.address = address
        settings = manager.settings
        self.node = NodeClient(
            leader,
            _endpoint(address, settings.security),
            client_id=f"replica-fetcher-{settings.broker_id}",
            security=settings.security,
        )
        self.partitions: dict[TopicPartition, FetchState] = {}
        self.last_leader_hw: dict[TopicPartition, int] = {}
        # Kept up to date as partitions change, so no loop scans every partition:
        self.truncating: set[TopicPartition] = set()  # to find their divergence point
        self.paused: dict[TopicPartition, int] = {}  # after an error, until (ms)
        self.held_back: set[TopicPartition] = set()  # throttled while over the quota
        # The fetch session at the leader: its id (NO_SESSION: the next fetch is full and
        # opens one), the epoch of the next fetch, the partitions it holds and those whose
        # fetch state it does not know yet (named by the next fetch).
        self.session_id = NO_SESSION
        self.session_epoch = INITIAL_EPOCH
        self.in_session: set[TopicPartition] = set()
        self.unsent: set[TopicPartition] = set()
        self.forget: set[TopicPartition] = set()  # to drop from the session
        # When each partition last got records (a full fetch names the least recent first).
        self.served: dict[TopicPartition, int] = {}
        self._turns = 0
        self._changed = asyncio.Event()
        self.task: asyncio.Task | None = None

    def __repr__(self) -> str:
        return f"ReplicaFetcher(leader {self.leader}, #{self.index}, {len(self.partitions)})"

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(), name=repr(self))

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
        self.node.close()

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        # A new leadership (or epoch) always starts by finding the divergence point.
        self.partitions[tp] = FetchState(leader_epoch)
        self.truncating.add(tp)
        self.paused.pop(tp, None)
        self._changed.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self.last_leader_hw.pop(tp, None)
        self.truncating.discard(tp)
        self.paused.pop(tp, None)
        self.held_back.discard(tp)
        self.unsent.discard(tp)
        self.served.pop(tp, None)
        self._leave(tp)

    def _fail(self, tp: TopicPartition, error: BaseException) -> None:
        self.remove(tp)  # out of this fetch loop and its session at once
        self.manager.fail(tp, error)

    def _leave(self, tp: TopicPartition) -> None:
        """`tp` is not fetched for now: the next fetch drops it from the session."""
        if tp in self.in_session:
            self.forget.add(tp)

    def _back(self, tp: TopicPartition) -> None:
        """`tp` is fetched again: the next fetch names it."""
        if tp in self.paused or tp in self.held_back:
            return  # still left out (records of a fetch sent before it was)
        self.forget.discard(tp)
        self.unsent.add(tp)

    def fetchable(self) -> int:
        """Partitions the next fetch covers (neither truncating nor paused nor held back)."""
        return len(self.partitions) - len(self.truncating) - len(self.paused) - len(self.held_back)

    # -- the loop -------------------------------------------------------------------------
    async def _run(self) -> None:
        settings = self.manager.settings
        while self.partitions:
            now = self.manager.now_ms()
            try:
                if self.truncating:
                    await self._truncate(list(self.truncating))
                    continue
                self._resume(now)
                self._apply_quota()
                if self.fetchable() <= 0 and not self.in_session:
                    # Everything paused or throttled: wait for a retry or the rate to fall.
                    await self._wait(settings.backoff_ms / 1000)
                    continue
                await self._fetch()
            except asyncio.CancelledError:
                raise
            except (NetworkError, RequestTimedOutError, KafkaError) as exc:
                log.info("%r: %s; retrying in %d ms", self, exc, settings.backoff_ms)
                await asyncio.sleep(settings.backoff_ms / 1000)
            except Exception:
                log.exception("%r failed; retrying", self)
                await asyncio.sleep(settings.backoff_ms / 1000)

    async def _wait(self, seconds: float) -> None:
        self._changed.clear()
        try:
            await asyncio.wait_for(self._changed.wait(), seconds)
        except TimeoutError:
            pass

    def _pause(self, tp: TopicPartition) -> None:
        if tp in self.partitions:
            self.paused[tp] = self.manager.now_ms() + self.manager.settings.backoff_ms
            self._leave(tp)

    def _resume(self, now: int) -> None:
        for tp, retry_at in list(self.paused.items()):  # the paused ones only: few
            if retry_at <= now:
                del self.paused[tp]
                self._back(tp)

    # -- truncation ---------------------------------------------------------------------
    async def _truncate(self, tps: list[TopicPartition]) -> None:
        replicas = self.manager.replicas
        topics: dict[str, list[dict]] = {}
        asked: dict[TopicPartition, int] = {}
        for tp in tps:
            partition = replicas.get(*tp)
            if partition is None:
                self.remove(tp)
                continue
            epoch = partition.log.leader_epochs.latest_epoch()
            if epoch == UNDEFINED_EPOCH:  # an empty log has nothing to cut
                self._truncated(tp)
                continue
            asked[tp] = epoch
            topics.setdefault(tp[0], []).append(
                {
                    "partition": tp[1],
                    "current_leader_epoch": self.partitions[tp].leader_epoch,
                    "leader_epoch": epoch,
                }
            )
        if not topics:
            return
        body = {
            "replica_id": self.manager.settings.broker_id,
            "topics": [{"topic": t, "partitions": p} for t, p in topics.items()],
        }
        response = await self.node.request(
            OFFSET_FOR_LEADER_EPOCH_API.key,
            OFFSET_FOR_LEADER_EPOCH_API.max_version,
            body,
            self.manager.settings.request_timeout_s,
        )
        for topic in response["topics"]:
            for answer in topic["partitions"]:
                tp = (topic["topic"], answer["partition"])
                state = self.partitions.get(tp)
                partition = replicas.get(*tp)
                if state is None or partition is None or tp not in asked:
                    continue
                code = answer["error_code"]
                if code != ErrorCode.NONE:
                    log.info("%s-%d: OffsetForLeaderEpoch error %s", *tp, code)
                    self._pause(tp)
                    continue
                try:
                    self._truncate_one(tp, partition, asked[tp], answer)
                except Exception as exc:  # this partition's alone, as Kafka's doTruncate
                    self._fail(tp, exc)

    def _truncate_one(self, tp: TopicPartition, partition, asked_epoch: int, answer) -> None:
        offset = _divergence(partition, asked_epoch, answer)
        if offset < partition.log.log_end_offset:
            log.info(
                "%s-%d: truncating from %d to %d (leader epoch %d ends at %d)",
                *tp,
                partition.log.log_end_offset,
                offset,
                answer["leader_epoch"],
                answer["end_offset"],
            )
            partition.truncate_to(offset)
        self._truncated(tp)

    def _truncated(self, tp: TopicPartition) -> None:
        self.truncating.discard(tp)
        self._back(tp)  # its fetch offset (and maybe epoch) is new to the session

    # -- fetching -------------------------------------------------------------------------
    async def _fetch(self) -> None:
        settings = self.manager.settings
        replicas = self.manager.replicas
        full = self.session_id == NO_SESSION
        if full:  # open a session: name everything fetchable
            covered = self.partitions.keys() - self.truncating - self.paused.keys()
            named = covered - self.held_back
            forgotten: set[TopicPartition] = set()
        else:
            named = self.unsent - self.truncating - self.paused.keys() - self.held_back
            forgotten = set(self.forget)
        topics: dict[str, list[dict]] = {}
        for tp in sorted(named, key=lambda tp: self.served.get(tp, 0)) if full else named:
            partition = replicas.get(*tp)
            if partition is None:
                self.remove(tp)
                continue
            topics.setdefault(tp[0], []).append(
                {
                    "partition": tp[1],
                    "current_leader_epoch": self.partitions[tp].leader_epoch,
                    "fetch_offset": partition.log.log_end_offset,
                    "log_start_offset": partition.log.log_start_offset,
                    "partition_max_bytes": settings.partition_max_bytes,
                }
            )
        if full and not topics:
            return
        gone: dict[str, list[int]] = {}
        for tp in forgotten:
            gone.setdefault(tp[0], []).append(tp[1])
        body = {
            "replica_id": settings.broker_id,
            "max_wait_ms": settings.max_wait_ms,
            "min_bytes": settings.min_bytes,
            "max_bytes": settings.max_bytes,
            "isolation_level": 0,
            "session_id": self.session_id,
            "session_epoch": INITIAL_EPOCH if full else self.session_epoch,
            "topics": [{"topic": t, "partitions": p} for t, p in topics.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": p} for t, p in gone.items()],
            "rack_id": "",
        }
        sent = {(t, p["partition"]) for t, ps in topics.items() for p in ps}
        self.unsent -= sent
        self.forget -= forgotten
        try:
            response = await self.node.request(
                FETCH_API.key,
                FETCH_API.max_version,
                body,
                settings.request_timeout_s + settings.max_wait_ms / 1000,
            )
        except BaseException:
            # Whether the leader saw this fetch (and moved the session's epoch) is unknown.
            self._close_session()
            raise
        if response["error_code"] != ErrorCode.NONE:
            log.info("%r: fetch session error %s: a full fetch next", self, response["error_code"])
            self._close_session()
            return
        self._session_answered(full, response["session_id"], sent, forgotten)
        now = self.manager.now_ms()
        for topic in response["responses"]:
            for answer in topic["partitions"]:
                tp = (topic["topic"], answer["partition_index"])
                partition = replicas.get(*tp)
                if self.manager.quota is not None and partition is not None:
                    if self._throttled(tp, partition):
                        self.manager.quota.record(len(answer["records"] or b""))
                try:
                    self._take(tp, answer, now)
                except Exception as exc:  # this partition's alone (F3 in docs/faults.md)
                    self._fail(tp, exc)

    def _session_answered(
        self, full: bool, session_id: int, sent: set[TopicPartition], forgotten: set
    ) -> None:
        if full:
            self.session_id = session_id
            self.session_epoch = next_epoch(INITIAL_EPOCH) if session_id else INITIAL_EPOCH
            self.in_session = set(sent) if session_id else set()
        else:
            self.session_epoch = next_epoch(self.session_epoch)
            self.in_session -= forgotten
            self.in_session |= sent

    def _close_session(self) -> None:
        """Forget the session: the next fetch is a full one, naming every partition."""
        self.session_id, self.session_epoch = NO_SESSION, INITIAL_EPOCH
        self.in_session.clear()
        self.unsent.clear()
        self.forget.clear()

    def _apply_quota(self) -> None:
        """Over the follower quota, throttled partitions are held back (left out of the
        session); under it, or once no longer throttled, they come back. Scans the
        partitions only while over the quota."""
        quota = self.manager.quota
        throttled: set[TopicPartition] = set()
        if quota is not None and quota.exceeded():
            replicas = self.manager.replicas
            for tp in self.partitions:
                partition = replicas.get(*tp)
                if partition is not None and self._throttled(tp, partition):
                    throttled.add(tp)
        released, self.held_back = self.held_back - throttled, throttled
        for tp in throttled:
            self._leave(tp)
        for tp in released:
            self._back(tp)

    def _throttled(self, tp: TopicPartition, partition) -> bool:
        """A replica catching up (out of the ISR) that its topic throttles here."""
        me = self.manager.settings.broker_id
        if me in partition.isr:
            return False
        listed = self.manager.replicas.topic_configs.throttled_replicas(tp[0], FOLLOWER_REPLICAS)
        return is_throttled(listed, tp[1], me)

    def _take(self, tp: TopicPartition, answer: dict, now: int) -> None:
        partition = self.manager.replicas.get(*tp)
        state = self.partitions.get(tp)
        if partition is None or state is None or partition.leader_epoch != state.leader_epoch:
            return  # leadership moved on while the fetch was out
        code = answer["error_code"]
        if code == ErrorCode.NONE:
            records = answer["records"]
            try:
                if records and partition.append_as_follower(records, now):
                    self._back(tp)  # a new fetch offset
                    self._turns += 1
                    self.served[tp] = self._turns
            except CorruptRecordError as exc:
                log.error("%s-%d: %s", *tp, exc)
                self._pause(tp)
                return
            except KafkaStorageError:
                # Its log dir went offline: the replica manager stopped fetching it.
                return
            self.last_leader_hw[tp] = answer["high_watermark"]
            partition.follower_high_watermark(answer["high_watermark"])
        elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._out_of_range(tp, partition, answer)
        elif code in _WAIT_FOR_LEADERSHIP:
            self._pause(tp)
        else:
            log.warning("%s-%d: fetch error %s from leader %d", *tp, code, self.leader)
            self._pause(tp)

    def _out_of_range(self, tp: TopicPartition, partition, answer: dict) -> None:
        leader_start = answer["log_start_offset"]
        if partition.log.log_end_offset < leader_start:
            # Everything we have was deleted at the leader: start over at its log start.
            log.info("%s-%d: behind the leader's log start %d: restarting there", *tp, leader_start)
            partition.start_over_at(leader_start)
            self._back(tp)
        else:
            # Ahead of the leader: find the divergence point again.
            self.truncating.add(tp)


def _divergence(partition, asked_epoch: int, answer: dict) -> int:
    """Where the follower's log must end, from the leader's answer about `asked_epoch`."""
    log_end = partition.log.log_end_offset
    leader_epoch, end_offset = answer["leader_epoch"], answer["end_offset"]
    if end_offset == UNDEFINED_OFFSET or leader_epoch == UNDEFINED_EPOCH:
        # The leader has no epoch that old: keep what the high watermark vouches for.
        return min(partition.high_watermark, log_end)
    if leader_epoch == asked_epoch:
        return min(end_offset, log_end)
    # The leader's newest epoch at or below ours is older (KIP-279): our log may hold
    # batches of epochs it never had; cut at the end of that epoch on both sides.
    ours = partition.log.leader_epochs.end_offset_for(leader_epoch, log_end)
    return min(end_offset, ours[1] if ours[1] >= 0 else end_offset, log_end)
