"""Fetch: file regions of whole batches below the high watermark, long-polled.

A read_committed fetch (isolation_level 1) reads below the last stable offset instead and
gets the aborted transactions of the range it reads, so the consumer drops their records
(docs/contracts/fetch.md, "read_committed"); every answer carries the LSO.

A fetch (v7+) may belong to a fetch session (KIP-227, broker/server/fetch_session.py):
then it names only the partitions whose fetch state changed, and its answer carries only
partitions with something new. A fetch with `max_wait_ms` and `min_bytes` that finds fewer
bytes than `min_bytes` waits in the fetch purgatory (a `DelayedFetch`), keyed by its
session or else by its partitions (a follower's by `ReplicaKey`s); BrokerContext completes
it when one of them has something new for it -- a follower's on an append
(`partition_grew`), anyone's when the high watermark or leadership moves
(`partition_changed`) -- the purgatory's timer when `max_wait_ms` passes (then it answers
with whatever there is). Partition errors answer at once.
"""

from __future__ import annotations

import os

from broker.cluster import TopicPartition
from broker.log.log import KafkaStorageError, OffsetOutOfRange
from broker.protocol.apis import FETCH_API
from broker.protocol.errors import ErrorCode
from broker.records.header import CODEC_ZSTD, HEADER_SIZE, parse_header
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed
from broker.server.context import BrokerContext
from broker.server.fetch_session import ReplicaKey, SessionFetch, SessionKey, requested
from broker.server.handlers.answers import per_partition
from broker.server.handlers.base import (
    Answer,
    ApiHandler,
    Delayed,
    leader_error,
    respond,
)
from broker.server.replication_quota import LEADER_REPLICAS, is_throttled
from broker.server.request import RequestContext
from broker.util.purgatory import DelayedOperation


def _empty(
    index: int, code: ErrorCode, hw: int = -1, log_start: int = -1, lso: int | None = None
) -> dict:
    # An empty record set, never null, even with an error: librdkafka reads a null
    # (size -1) record set as a corrupt response and drops the whole Fetch answer.
    return {
        "partition_index": index,
        "error_code": code,
        "high_watermark": hw,
        "last_stable_offset": hw if lso is None else lso,
        "log_start_offset": log_start,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }


# Fetch v10 is the first a consumer that understands zstd sends (KIP-110).
ZSTD_MIN_VERSION = 10
# Fetch v7 brought fetch sessions (KIP-227).
SESSIONS_MIN_VERSION = 7
READ_COMMITTED = 1
# Compared with for every partition answered (an enum member's lookup is not free).
_NONE = ErrorCode.NONE


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    refused = _refused_topics(ctx, request, body)
    if not refused:
        return _fetch(ctx, request, body)
    entries = error_response(
        {"topics": [t for t in body["topics"] if t["topic"] in refused]},
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    )["responses"]
    rest = [t for t in body["topics"] if t["topic"] not in refused]
    if not rest:
        return {**error_response({"topics": []}, ErrorCode.NONE), "responses": entries}
    result = _fetch(ctx, request, {**body, "topics": rest})
    return respond(
        result.operation if isinstance(result, Delayed) else result,
        lambda response: {**response, "responses": response["responses"] + entries},
    )


def _refused_topics(ctx: BrokerContext, request: RequestContext, body: dict) -> set[str]:
    """Kafka's checks: a follower's fetch needs CLUSTER_ACTION, a consumer's READ on each
    topic (refused ones answer TOPIC_AUTHORIZATION_FAILED)."""
    if ctx.authorizer is None:
        return set()
    names = {t["topic"] for t in body["topics"]}
    if body.get("replica_id", -1) >= 0:
        return (
            set()
            if allowed(ctx, request, Operation.CLUSTER_ACTION, ResourceType.CLUSTER)
            else names
        )
    return {n for n in names if not allowed(ctx, request, Operation.READ, ResourceType.TOPIC, n)}


def _fetch(ctx: BrokerContext, request: RequestContext, body: dict):
    follower = body.get("replica_id", -1) >= 0
    now = ctx.now_ms()
    if request.api_version >= SESSIONS_MIN_VERSION:
        plan = ctx.fetch_sessions.new_fetch(body, follower, now)
    else:
        plan = SessionFetch(requested(body), full=True)
    if plan.error != ErrorCode.NONE:
        return {"throttle_time_ms": 0, "error_code": plan.error, "session_id": 0, "responses": []}
    if follower:
        _record_follower(ctx, body, plan.session)
    operation = DelayedFetch(ctx, body, plan, now + body["max_wait_ms"], request.api_version)
    if body["max_wait_ms"] <= 0 or body["min_bytes"] <= 0:
        return operation.on_expiration(now)
    if ctx.fetch_purgatory.try_complete_else_watch(operation, now):
        return operation.result
    return Delayed(operation)


class DelayedFetch(DelayedOperation):
    """A fetch waiting for `min_bytes` on its partitions or for its deadline.

    Kafka's way: the first check reads every partition the fetch covers (and answers if
    there is enough); after that, an event on one partition looks at that partition alone
    and adds its bytes to a running total; the answer is read once, when the total
    reaches `min_bytes` (or a partition has an error) or the deadline passes. A session's
    fetch waits on the session's key (one watcher, whatever its size) and learns which
    partitions changed from the session (`fresh`); a sessionless one on its partitions.
    """

    def __init__(
        self, ctx: BrokerContext, body: dict, plan: SessionFetch, deadline_ms: int, version: int
    ) -> None:
        session = plan.session
        follower = body.get("replica_id", -1) >= 0
        if session is not None:
            keys = [session.key]
        elif follower:  # woken by appends too (BrokerContext.partition_grew)
            keys = [ReplicaKey(tp) for tp, _ in plan.partitions]
        else:
            keys = [tp for tp, _ in plan.partitions]
        super().__init__(deadline_ms, keys)
        self.ctx = ctx
        self.body = body
        self.plan = plan
        self.version = version
        self.follower = follower
        self.read_committed = body.get("isolation_level", 0) == READ_COMMITTED
        self.reads = 0  # partition reads for this fetch: what the tallies count
        self._bytes: dict[TopicPartition, int] = {}
        self._available = 0
        self._looked = False
        self._changed: set[TopicPartition] = set()
        self._named = dict(plan.partitions) if session is None else {}

    def on_key(self, key) -> None:
        if isinstance(key, SessionKey):
            session = self.plan.session
            self._changed |= session.fresh
            session.fresh.clear()
        elif isinstance(key, ReplicaKey):
            self._changed.add(key.tp)
        else:
            self._changed.add(key)

    def try_complete(self, now_ms: int) -> bool:
        if not self._looked:  # the first check: everything the fetch covers, once
            self._looked = True
            response = self._answer(final=False)
            return response is not None and self.complete(response)
        changed, self._changed = self._changed, set()
        # What this check read, by partition: the answer made now reuses a read whose
        # limits it would ask again, instead of reading the partition a second time (a
        # parked follower fetch woken by an append read its batch twice; issue 23).
        fresh: dict[TopicPartition, tuple[int, dict, int]] = {}
        for tp in changed:
            preq = self._request_of(tp)
            if preq is None:
                continue
            limit = preq["partition_max_bytes"]
            entry = self._read(tp, preq, limit, min_one=True)
            size = sum(len(r) for r in entry["records"])
            fresh[tp] = (limit, entry, size)
            if entry["error_code"] != ErrorCode.NONE:
                return self.complete(self._answer(final=True, fresh=fresh))
            self._available += size - self._bytes.get(tp, 0)
            self._bytes[tp] = size
        if self._available >= self.body["min_bytes"]:
            return self.complete(self._answer(final=True, fresh=fresh))
        return False

    def on_expiration(self, now_ms: int) -> dict:
        return self._answer(final=True)

    def _request_of(self, tp: TopicPartition) -> dict | None:
        if self.plan.session is not None:
            return self.plan.session.partitions.get(tp)
        return self._named.get(tp)

    def _covered(self) -> list[tuple[TopicPartition, dict]]:
        """What the answer reads: all the fetch named (a full fetch), or the session's
        partitions with news as they are now (an incremental one)."""
        session = self.plan.session
        if self.plan.full or session is None:
            return self.plan.partitions
        return [(tp, session.partitions[tp]) for tp in session.news]

    def _read(self, tp: TopicPartition, preq: dict, limit: int, min_one: bool) -> dict:
        self.reads += 1
        entry = _fetch_partition(
            self.ctx,
            tp[0],
            preq,
            limit,
            min_one=min_one,
            replica_id=self.body.get("replica_id", -1),
            read_committed=self.read_committed,
        )
        if self.version < ZSTD_MIN_VERSION and entry["records"] and _has_zstd(entry["records"]):
            # An older consumer cannot read zstd batches: Kafka answers this error.
            entry = _empty(
                entry["partition_index"],
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                entry["high_watermark"],
                entry["log_start_offset"],
                entry["last_stable_offset"],
            )
        return entry

    def _answer(self, final: bool, fresh: dict | None = None) -> dict | None:
        """The response, or None when fewer than min_bytes are there and not `final`.
        `fresh`: partitions read at this same moment with (limit, min_one=True), their
        entry and size, taken as they are where the answer asks the same."""
        budget = ResponseBudget(self.body.get("max_bytes", 0x7FFFFFFF))
        total = 0
        any_error = False
        read: list[tuple[TopicPartition, dict, dict, int]] = []
        for tp, preq in self._covered():
            limit = budget.limit(preq["partition_max_bytes"])
            done = fresh.get(tp) if fresh else None
            if done is not None and done[0] == limit and budget.min_one:
                _, entry, size = done
            else:
                entry = self._read(tp, preq, limit, min_one=budget.min_one)
                size = sum(len(r) for r in entry["records"])
            budget.took(size)
            total += size
            any_error |= entry["error_code"] != ErrorCode.NONE
            read.append((tp, preq, entry, size))
            self._bytes[tp] = size
        self._available = total
        if not final and total < self.body["min_bytes"] and not any_error:
            return None
        return self._settle(read)

    def _settle(self, read: list[tuple[TopicPartition, dict, dict, int]]) -> dict:
        """The final answer: an incremental one carries only partitions with something new;
        the session learns what each partition was told."""
        session, full = self.plan.session, self.plan.full
        metrics = self.ctx.metrics
        by_topic: dict[str, list[dict]] = {}
        answered = 0
        for tp, preq, entry, size in read:
            if session is not None:
                told = (
                    entry["high_watermark"],
                    entry["last_stable_offset"],
                    entry["log_start_offset"],
                )
                new = size or entry["error_code"] or session.told.get(tp) != told
                session.settle(tp, told, self._more(tp, preq, entry), sent=bool(size))
                if not (full or new):
                    continue
            answers = by_topic.get(tp[0])
            if answers is None:
                answers = by_topic[tp[0]] = []
            answers.append(entry)
            answered += 1
            if size:
                metrics.fetched(tp[0], size)
        metrics.fetch_served(self.follower, _named(self.body), answered, self.reads)
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "session_id": self.plan.session_id,
            "responses": [{"topic": t, "partitions": p} for t, p in by_topic.items()],
        }

    def _more(self, tp: TopicPartition, preq: dict, entry: dict) -> bool:
        """Whether the fetcher may still get data beyond the fetch offset the session
        holds for `tp` (then it stays among the session's news)."""
        if entry["error_code"] != _NONE:
            return False
        if not self.follower:  # a consumer's readable end is in its answer already
            readable = entry["last_stable_offset" if self.read_committed else "high_watermark"]
            return readable > preq["fetch_offset"]
        partition = self.ctx.replicas.get(*tp)
        if partition is None:
            return False
        return partition.log.log_end_offset > preq["fetch_offset"]


class ResponseBudget:
    """Kafka's size rule for one Fetch answer (docs/contracts/fetch.md, "Size limits"),
    partition by partition in answer order: each may take up to its `partition_max_bytes`
    and what the request's `max_bytes` has left; until a partition has returned records,
    its first batch comes whole even past both (KIP-74: a fetch always makes progress);
    after that a partition whose next batch does not fit gets none.

    Sans-I/O: `limit` and `min_one` before reading a partition, `took` after it."""

    def __init__(self, max_bytes: int) -> None:
        self.remaining = max(0, max_bytes)
        self.min_one = True

    def limit(self, partition_max_bytes: int) -> int:
        return max(0, min(partition_max_bytes, self.remaining))

    def took(self, size: int) -> None:
        self.remaining = max(0, self.remaining - size)
        if size:
            self.min_one = False


def _named(body: dict) -> int:
    return sum(len(t["partitions"]) for t in body["topics"])


def _readable(partition, follower: bool, read_committed: bool) -> int:
    """Where a fetcher's reading stops: a follower reads up to the log end (it is what
    makes the high watermark move); a consumer only below the high watermark, a
    read_committed one below the last stable offset."""
    if follower:
        return partition.log.log_end_offset
    return partition.last_stable_offset if read_committed else partition.high_watermark


def _fetch_partition(
    ctx: BrokerContext,
    topic: str,
    preq: dict,
    limit: int,
    min_one: bool,
    replica_id: int = -1,
    read_committed: bool = False,
) -> dict:
    """One partition's answer: whole batches from `fetch_offset`, at most `limit` bytes
    (`min_one`: the first batch comes whole even past it; ResponseBudget says which)."""
    index = preq["partition"]
    partition = ctx.replicas.get(topic, index)
    # No fetching from followers (KIP-392 is not implemented).
    code = leader_error(partition, preq.get("current_leader_epoch", -1))
    if code != ErrorCode.NONE:
        return _empty(index, code)
    hw, log_start = partition.high_watermark, partition.log.log_start_offset
    lso = partition.last_stable_offset
    offset = preq["fetch_offset"]
    readable = _readable(partition, replica_id >= 0, read_committed)
    # Between the readable end and the log end is not out of range: just nothing yet.
    if partition.log.log_end_offset >= offset >= readable:
        return _empty(index, ErrorCode.NONE, hw, log_start, lso)
    if limit <= 0 and not min_one:  # the response is full
        return _empty(index, ErrorCode.NONE, hw, log_start, lso)
    throttled = replica_id >= 0 and _leader_throttles(ctx, partition, replica_id)
    if throttled and ctx.leader_quota.exceeded():
        return _empty(index, ErrorCode.NONE, hw, log_start, lso)
    try:
        result = partition.log.read(offset, limit, max_offset=readable, min_one=min_one)
    except OffsetOutOfRange:
        return _empty(index, ErrorCode.OFFSET_OUT_OF_RANGE, hw, log_start, lso)
    except KafkaStorageError:  # the read's I/O error took the log dir offline
        return _empty(index, ErrorCode.KAFKA_STORAGE_ERROR)
    entry = _empty(index, ErrorCode.NONE, hw, log_start, lso)
    entry["records"] = result.regions
    if read_committed and result.regions:
        # Kafka's list: (producer id, first offset) of each aborted transaction the
        # range may hold; the range read ends below `readable` (the LSO).
        aborted = partition.log.aborted_transactions(offset, readable)
        entry["aborted_transactions"] = [
            {"producer_id": a.producer_id, "first_offset": a.first_offset} for a in aborted
        ]
    if throttled:
        ctx.leader_quota.record(result.size)
    return entry


def _leader_throttles(ctx: BrokerContext, partition, replica_id: int) -> bool:
    """A follower catching up (out of the ISR) of a replica its topic throttles here
    (broker/server/replication_quota.py)."""
    if ctx.leader_quota is None or replica_id in partition.isr:
        return False
    listed = ctx.replicas.topic_configs.throttled_replicas(partition.topic, LEADER_REPLICAS)
    return is_throttled(listed, partition.index, ctx.replicas.broker_id)


def _record_follower(ctx: BrokerContext, body: dict, session) -> None:
    """A follower fetches from its log end: the leader learns how far each follower is
    (moving the high watermark, letting it back into the ISR). The partitions the request
    names (an incremental fetch leaves out those whose offset did not change), and those
    of its session whose ISR lacks it (`ReplicaManager.out_of_sync`), from the offset the
    session holds: nothing else would let a caught-up follower back in while nothing is
    appended (docs/contracts/cluster.md, "Replication")."""
    replica_id = body["replica_id"]
    for topic in body["topics"]:
        for preq in topic["partitions"]:
            partition = ctx.replicas.get(topic["topic"], preq["partition"])
            if partition is not None and partition.is_leader:
                _record(ctx, replica_id, partition, preq, session)
    lagging = ctx.replicas.out_of_sync.get(replica_id)
    if session is None or not lagging:
        return
    for tp in list(lagging):
        preq, partition = session.partitions.get(tp), ctx.replicas.get(*tp)
        # Only where the offset it holds would let it in (a follower catching up on
        # thousands of partitions names the ones that move anyway).
        if (
            preq is not None
            and partition is not None
            and partition.is_leader
            and preq["fetch_offset"] >= partition.high_watermark
            and preq["fetch_offset"] >= partition.leader_epoch_start_offset
        ):
            _record(ctx, replica_id, partition, preq, session)


def _record(ctx: BrokerContext, replica_id: int, partition, preq: dict, session) -> None:
    # A fetch from an older leader epoch (sent before the controller's last decision,
    # e.g. by a broker stopping) is refused below: it must not count.
    if preq.get("current_leader_epoch", -1) in (-1, partition.leader_epoch):
        ctx.replicas.follower_fetched(partition, replica_id, preq["fetch_offset"], session)


def _has_zstd(regions) -> bool:
    """Whether a zstd batch starts in these file regions (headers read, nothing else)."""
    for region in regions:
        position, end = region.position, region.position + region.size
        while end - position >= HEADER_SIZE:
            header = parse_header(os.pread(region.fd, HEADER_SIZE, position))
            if header.codec == CODEC_ZSTD:
                return True
            position += header.size
    return False


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "session_id": 0,
        "responses": per_partition(
            body["topics"], lambda _, p: _empty(p["partition"], code), "topic"
        ),
    }


HANDLER = ApiHandler(FETCH_API, handle, error_response)
