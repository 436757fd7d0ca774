"""The low-level fetch API of Kafka's 0.7/0.8 design: the caller owns the offsets.

`SimpleConsumer.fetch(topic, partition, offset, max_bytes)` returns the raw record
bytes the leader sent and decodes records lazily; `fetch_many` sends one Fetch per
leader for many partitions. There is no group, no commit and no position: where to
read next is `FetchResult.next_offset`, kept by the caller (the hourly load keeps it
in its manifest).

Leader changes and broker restarts are followed: retriable partition errors and
broken connections refresh the metadata, reconnect and retry with backoff until
`timeout_s` has passed. Other errors are final (see FetchResult.raise_for_error).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import NamedTuple

from broker.client.cluster import ClusterMetadata
from broker.client.connection import UNREACHABLE
from broker.client.isolation import READ_UNCOMMITTED, visible_records
from broker.client.isolation import isolation_level as isolation_level_of
from broker.client.security import SecurityConfig
from broker.protocol.apis import FETCH, LIST_OFFSETS
from broker.protocol.errors import (
    ErrorCode,
    KafkaError,
    NetworkError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
    as_error_code,
    error_for,
    retriable,
)
from broker.records.batch import Record, iter_batches

EARLIEST = -2
LATEST = -1
_INT32_MAX = 0x7FFFFFFF
_BACKOFF_START_S = 0.05
_BACKOFF_MAX_S = 1.0


class FetchRequest(NamedTuple):
    topic: str
    partition: int
    offset: int
    max_bytes: int = 1048576


class FetchResult:
    """One partition's answer to a fetch.

    `records_bytes` holds the record batches exactly as received; the first batch may
    start before the requested offset and the last one may be cut short (both allowed
    by the protocol); `records()` hides both.
    """

    __slots__ = (
        "topic",
        "partition",
        "fetch_offset",
        "error",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "records_bytes",
        "error_message",
        "node_id",
        "isolation_level",
        "aborted_transactions",
        "_next_offset",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        fetch_offset: int,
        error: ErrorCode = ErrorCode.NONE,
        high_watermark: int = -1,
        last_stable_offset: int = -1,
        log_start_offset: int = -1,
        records_bytes: bytes = b"",
        error_message: str | None = None,
        node_id: int = -1,
        isolation_level: int = READ_UNCOMMITTED,
        aborted_transactions: list[tuple[int, int]] | None = None,
    ):
        self.topic = topic
        self.partition = partition
        self.fetch_offset = fetch_offset
        self.error = error
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.records_bytes = records_bytes
        self.error_message = error_message
        self.node_id = node_id  # the broker that answered; -1 when none did
        self.isolation_level = isolation_level
        # (producer id, first offset) of the aborted transactions in the answer's range
        self.aborted_transactions = aborted_transactions or []
        self._next_offset: int | None = None

    def __repr__(self) -> str:
        return (
            f"FetchResult({self.topic}-{self.partition} @{self.fetch_offset}, "
            f"error={self.error.name}, hw={self.high_watermark}, "
            f"{len(self.records_bytes)} bytes)"
        )

    def records(self) -> Iterator[Record]:
        """Data records at or after the requested offset, from complete batches only;
        read_committed leaves out those of aborted transactions."""
        return visible_records(
            self.records_bytes, self.fetch_offset, self.isolation_level, self.aborted_transactions
        )

    @property
    def next_offset(self) -> int:
        """The offset to fetch next: after the last complete batch, or the requested offset.

        Taken from batch headers, so it also steps over control batches and over
        offsets removed by compaction inside a batch.
        """
        if self._next_offset is None:
            nxt = self.fetch_offset
            for _, header in iter_batches(self.records_bytes):
                nxt = max(nxt, header.next_offset)
            self._next_offset = nxt
        return self._next_offset

    def raise_for_error(self) -> None:
        """Raise the KafkaError for `error`, if any."""
        if self.error == ErrorCode.NONE:
            return
        if self.error == ErrorCode.OFFSET_OUT_OF_RANGE:
            raise OffsetOutOfRangeError(
                self.topic,
                self.partition,
                self.fetch_offset,
                self.log_start_offset,
                self.high_watermark,
            )
        raise error_for(
            self.error,
            self.error_message or f"fetch of {self.topic}-{self.partition} at {self.fetch_offset}",
        )


# Partition errors after which fresh metadata (a new leader, a restarted broker) may help.
_REFRESH_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)


class SimpleConsumer:
    """Fetch from explicit (topic, partition, offset) positions; see the module docstring."""

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        client_id: str = "kafka-hourly",
        timeout_s: float = 30.0,
        security: SecurityConfig | None = None,
        isolation_level: str = "read_uncommitted",
    ):
        self.timeout_s = timeout_s
        # Sent in Fetch and ListOffsets: read_committed reads up to the last stable
        # offset and skips aborted transactions (broker/client/isolation.py).
        self.isolation_level = isolation_level_of(isolation_level)
        self.cluster = ClusterMetadata(bootstrap_servers, client_id, timeout_s, security)

    def close(self) -> None:
        self.cluster.close()

    def __enter__(self) -> SimpleConsumer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def partitions_for(self, topic: str) -> list[int]:
        return self.cluster.partitions_for(topic)

    # --- fetch --------------------------------------------------------------------

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1048576,
        max_wait_ms: int = 0,
        min_bytes: int = 0,
    ) -> FetchResult:
        """Records of one partition from `offset`, at most about `max_bytes` of them.

        The leader returns at least one whole batch even if it exceeds max_bytes.
        Raises the error of the partition if it has one (OffsetOutOfRangeError,
        UnknownTopicOrPartitionError, ...) once retries are exhausted.
        """
        request = FetchRequest(topic, partition, offset, max_bytes)
        result = self.fetch_many([request], max_wait_ms, min_bytes)[(topic, partition)]
        result.raise_for_error()
        return result

    def fetch_many(
        self,
        requests: list[FetchRequest],
        max_wait_ms: int = 0,
        min_bytes: int = 0,
        retry_for_s: float | None = None,
        max_bytes: int | None = None,
    ) -> dict[tuple[str, int], FetchResult]:
        """Fetch many partitions with one Fetch request per leader.

        Each request asks for at most each partition's `max_bytes` and `max_bytes` here in
        all (None: the sum of its partitions'); the leader fills it in the order given
        (docs/contracts/fetch.md, "Size limits"), so a partition may come back without
        records when the answer was full: ask again, putting it first.

        Returns a result for every request. Errors are not raised here: a partition
        whose error is final (or still retriable at the deadline) has `.error` set;
        call `raise_for_error()` on it. Only when no broker can be reached at all is
        NetworkError raised. Retries stop after `retry_for_s` (default `timeout_s`):
        a group consumer's poll() must come back to heartbeat and rebalance.
        """
        retry_for_s = self.timeout_s if retry_for_s is None else retry_for_s
        deadline = time.monotonic() + retry_for_s + max_wait_ms / 1000
        pending = {(r.topic, r.partition): r for r in requests}
        results: dict[tuple[str, int], FetchResult] = {}
        backoff = _BACKOFF_START_S
        last_error: Exception | None = None
        while True:
            retry, refresh, last_error = self._fetch_round(
                pending, results, max_wait_ms, min_bytes, last_error, max_bytes
            )
            if not retry:
                break
            if time.monotonic() + backoff >= deadline:
                if last_error is not None and not any(k in results for k in retry):
                    raise NetworkError(f"fetch gave up after {retry_for_s}s: {last_error}")
                break
            time.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX_S)
            pending = {k: pending[k] for k in retry}
            if refresh:
                try:
                    self.cluster.refresh(sorted({t for t, _ in pending}))
                except NetworkError as exc:
                    last_error = exc
        return results

    def _fetch_round(self, pending, results, max_wait_ms, min_bytes, last_error, max_bytes):
        """One attempt at every pending partition; returns (keys to retry, refresh?, error)."""
        retry: list[tuple[str, int]] = []
        refresh = False
        by_leader: dict[int, list[FetchRequest]] = {}
        for key, req in pending.items():
            try:
                leader = self.cluster.leader_for(req.topic, req.partition)
            except UnknownTopicOrPartitionError as exc:
                results[key] = FetchResult(
                    req.topic,
                    req.partition,
                    req.offset,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=exc.detail,
                )
                continue
            except KafkaError as exc:  # no leader yet, or metadata unreachable
                results.setdefault(
                    key,
                    FetchResult(
                        req.topic, req.partition, req.offset, exc.code, error_message=str(exc)
                    ),
                )
                retry.append(key)
                refresh = True
                last_error = exc
                continue
            by_leader.setdefault(leader, []).append(req)

        # Pipelined: every leader gets its request before any answer is awaited.
        sent = []
        for leader, reqs in by_leader.items():
            try:
                conn = self.cluster.connection(leader)
                version = conn.version_for(FETCH)
                body = self._fetch_body(reqs, max_wait_ms, min_bytes, max_bytes)
                cid = conn.send(FETCH, body, version)
                sent.append((leader, conn, cid, reqs))
            except UNREACHABLE as exc:
                self.cluster.drop_connection(leader)
                retry += [(r.topic, r.partition) for r in reqs]
                refresh, last_error = True, exc
        for leader, conn, cid, reqs in sent:
            try:
                response = conn.receive(cid, self.timeout_s + max_wait_ms / 1000)
            except UNREACHABLE as exc:
                self.cluster.drop_connection(leader)
                retry += [(r.topic, r.partition) for r in reqs]
                refresh, last_error = True, exc
                continue
            top_error = response.get("error_code", 0)
            if top_error:
                # A whole-request error (v7+, fetch sessions): every partition shares it.
                for r in reqs:
                    results[(r.topic, r.partition)] = FetchResult(
                        r.topic, r.partition, r.offset, as_error_code(top_error), node_id=leader
                    )
                    if retriable(top_error):
                        retry.append((r.topic, r.partition))
                continue
            offsets = {(r.topic, r.partition): r.offset for r in reqs}
            for t in response["responses"]:
                for p in t["partitions"]:
                    key = (t["topic"], p["partition_index"])
                    if key not in offsets:
                        continue
                    error = as_error_code(p["error_code"])
                    results[key] = FetchResult(
                        key[0],
                        key[1],
                        offsets.pop(key),
                        error,
                        p["high_watermark"],
                        p["last_stable_offset"],
                        p["log_start_offset"],
                        p["records"] or b"",
                        node_id=leader,
                        isolation_level=self.isolation_level,
                        aborted_transactions=[
                            (a["producer_id"], a["first_offset"])
                            for a in p.get("aborted_transactions") or ()
                        ],
                    )
                    if error in _REFRESH_ERRORS or retriable(error):
                        retry.append(key)
                        refresh = refresh or error in _REFRESH_ERRORS
            # A partition the leader left out of its answer is asked again.
            retry += list(offsets)
        return retry, refresh, last_error

    def _fetch_body(
        self, reqs: list[FetchRequest], max_wait_ms: int, min_bytes: int, max_bytes: int | None
    ) -> dict:
        if max_bytes is None:
            max_bytes = sum(r.max_bytes for r in reqs)
        topics: dict[str, list[dict]] = {}
        for r in reqs:
            topics.setdefault(r.topic, []).append(
                {
                    "partition": r.partition,
                    "current_leader_epoch": self._leader_epoch(r.topic, r.partition),
                    "fetch_offset": r.offset,
                    "log_start_offset": -1,
                    "partition_max_bytes": min(r.max_bytes, _INT32_MAX),
                }
            )
        return {
            "replica_id": -1,
            "max_wait_ms": max_wait_ms,
            "min_bytes": min_bytes,
            "max_bytes": min(max_bytes, _INT32_MAX),
            "isolation_level": self.isolation_level,
            # session 0 / epoch -1: a full fetch, no fetch session kept by the broker.
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }

    def _leader_epoch(self, topic: str, partition: int) -> int:
        meta = self.cluster.topics.get(topic)
        part = meta.partitions.get(partition) if meta is not None else None
        return part.leader_epoch if part is not None else -1

    # --- offsets ------------------------------------------------------------------

    def earliest_offset(self, topic: str, partition: int) -> int:
        """The log start offset: the first offset still in the log."""
        return self._list_offset(topic, partition, EARLIEST)

    def latest_offset(self, topic: str, partition: int) -> int:
        """The high watermark: the offset the next record will get (read_committed: the
        last stable offset, before the first open transaction)."""
        return self._list_offset(topic, partition, LATEST)

    def offsets_before(self, topic: str, partition: int, timestamp_ms: int) -> int:
        """The first offset whose timestamp is >= timestamp_ms, or -1 if there is none.

        (Kafka 0.8's OffsetRequest named this "offsets before"; since ListOffsets v1 the
        answer is the earliest offset at or after the time.)
        """
        if timestamp_ms < 0:
            raise ValueError("timestamp_ms must be >= 0; use earliest_offset/latest_offset")
        return self._list_offset(topic, partition, timestamp_ms)

    def _list_offset(self, topic: str, partition: int, timestamp: int) -> int:
        deadline = time.monotonic() + self.timeout_s
        backoff = _BACKOFF_START_S
        while True:
            failure: KafkaError | None = None
            try:
                error, offset = self._list_offset_once(topic, partition, timestamp)
            except UnknownTopicOrPartitionError:
                raise  # the metadata says the topic or partition does not exist
            except KafkaError as exc:  # no leader, or the leader is unreachable
                error, offset, failure = exc.code, -1, exc
            if error == ErrorCode.NONE:
                return offset
            if not (error in _REFRESH_ERRORS or retriable(error)):
                raise error_for(error, f"list offsets of {topic}-{partition}")
            if time.monotonic() + backoff >= deadline:
                if failure is not None:
                    raise failure
                raise error_for(error, f"list offsets of {topic}-{partition} after retries")
            time.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX_S)
            try:
                self.cluster.refresh([topic])
            except NetworkError:
                pass

    def _list_offset_once(self, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
        leader = self.cluster.leader_for(topic, partition)
        conn = self.cluster.connection(leader)
        body = {
            "replica_id": -1,
            "isolation_level": self.isolation_level,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": partition,
                            "current_leader_epoch": self._leader_epoch(topic, partition),
                            "timestamp": timestamp,
                        }
                    ],
                }
            ],
        }
        try:
            response = conn.request(LIST_OFFSETS, body)
        except UNREACHABLE:
            self.cluster.drop_connection(leader)
            raise
        for t in response["topics"]:
            for p in t["partitions"]:
                if t["name"] == topic and p["partition_index"] == partition:
                    return p["error_code"], p["offset"]
        raise KafkaError(
            f"ListOffsets answer lacks {topic}-{partition}", ErrorCode.UNKNOWN_SERVER_ERROR
        )
