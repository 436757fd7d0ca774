"""Fetch: file regions of whole batches below the high watermark, long-polled.

A fetch with `max_wait_ms` and `min_bytes` that finds fewer bytes than `min_bytes` waits in
the fetch purgatory (a `DelayedFetch`) keyed by its partitions; the replica manager
completes it when one of them grows, the purgatory's timer when `max_wait_ms` passes
(then it answers with whatever there is). Partition errors answer at once.
"""

from __future__ import annotations

import os

from broker.log.log import OffsetOutOfRange
from broker.protocol.apis import FETCH_API
from broker.protocol.errors import ErrorCode
from broker.records.header import CODEC_ZSTD, HEADER_SIZE, parse_header
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed
from broker.server.context import BrokerContext
from broker.server.handlers.answers import per_partition
from broker.server.handlers.base import (
    Answer,
    ApiHandler,
    Delayed,
    current_leader_epoch_error,
    respond,
)
from broker.server.replication_quota import LEADER_REPLICAS, is_throttled
from broker.server.request import RequestContext
from broker.util.purgatory import DelayedOperation


def _empty(index: int, code: ErrorCode, hw: int = -1, log_start: int = -1) -> dict:
    # An empty record set, never null, even with an error: librdkafka reads a null
    # (size -1) record set as a corrupt response and drops the whole Fetch answer.
    return {
        "partition_index": index,
        "error_code": code,
        "high_watermark": hw,
        "last_stable_offset": hw,
        "log_start_offset": log_start,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }


# Fetch v10 is the first a consumer that understands zstd sends (KIP-110).
ZSTD_MIN_VERSION = 10


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
    if body.get("replica_id", -1) >= 0:
        _record_follower(ctx, body)
    if body["max_wait_ms"] <= 0 or body["min_bytes"] <= 0:
        return read(ctx, body, final=True, version=request.api_version)
    now = ctx.now_ms()
    operation = DelayedFetch(ctx, body, now + body["max_wait_ms"], request.api_version)
    if ctx.fetch_purgatory.try_complete_else_watch(operation, now):
        return operation.result
    return Delayed(operation)


class DelayedFetch(DelayedOperation):
    """A fetch waiting for `min_bytes` on its partitions or for its deadline."""

    def __init__(self, ctx: BrokerContext, body: dict, deadline_ms: int, version: int) -> None:
        super().__init__(deadline_ms, partitions_of(body))
        self.ctx = ctx
        self.body = body
        self.version = version

    def try_complete(self, now_ms: int) -> bool:
        response = read(self.ctx, self.body, final=False, version=self.version)
        return response is not None and self.complete(response)

    def on_expiration(self, now_ms: int) -> dict:
        return read(self.ctx, self.body, final=True, version=self.version)


def read(
    ctx: BrokerContext, body: dict, final: bool, version: int = FETCH_API.max_version
) -> dict | None:
    """The response, or None when fewer than min_bytes are there and not `final`."""
    remaining = body.get("max_bytes", 0x7FFFFFFF)
    min_bytes = body["min_bytes"]
    replica_id = body.get("replica_id", -1)
    total = 0
    any_error = False
    responses = []
    sent: list[tuple[str, int]] = []  # bytes per topic, counted once the answer is final
    for topic in body["topics"]:
        name = topic["topic"]
        partitions = []
        before = total
        for preq in topic["partitions"]:
            entry = _fetch_partition(
                ctx, name, preq, remaining, first=(total == 0), replica_id=replica_id
            )
            if version < ZSTD_MIN_VERSION and entry["records"] and _has_zstd(entry["records"]):
                # An older consumer cannot read zstd batches: Kafka answers this error.
                entry = _empty(
                    entry["partition_index"],
                    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                    entry["high_watermark"],
                    entry["log_start_offset"],
                )
            size = sum(len(r) for r in entry["records"])
            total += size
            remaining = max(0, remaining - size)
            any_error |= entry["error_code"] != ErrorCode.NONE
            partitions.append(entry)
        responses.append({"topic": name, "partitions": partitions})
        if total > before:
            sent.append((name, total - before))
    if not final and total < min_bytes and not any_error:
        return None
    for name, size in sent:
        ctx.metrics.fetched(name, size)
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "session_id": 0,
        "responses": responses,
    }


def _fetch_partition(
    ctx: BrokerContext, topic: str, preq: dict, remaining: int, first: bool, replica_id: int = -1
) -> dict:
    index = preq["partition"]
    partition = ctx.replicas.get(topic, index)
    if partition is None:
        return _empty(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not partition.is_leader:  # no fetching from followers (KIP-392 is not implemented)
        return _empty(index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    code = current_leader_epoch_error(preq.get("current_leader_epoch", -1), partition.leader_epoch)
    if code != ErrorCode.NONE:
        return _empty(index, code)
    hw, log_start = partition.high_watermark, partition.log.log_start_offset
    offset = preq["fetch_offset"]
    # A follower reads up to the log end (it is what makes the high watermark move); a
    # consumer only below the high watermark.
    readable = partition.log.log_end_offset if replica_id >= 0 else hw
    # Between the readable end and the log end is not out of range: just nothing yet.
    if partition.log.log_end_offset >= offset >= readable:
        return _empty(index, ErrorCode.NONE, hw, log_start)
    limit = min(preq["partition_max_bytes"], remaining)
    if limit <= 0 and not first:
        return _empty(index, ErrorCode.NONE, hw, log_start)
    throttled = replica_id >= 0 and _leader_throttles(ctx, partition, replica_id)
    if throttled and ctx.leader_quota.exceeded():
        return _empty(index, ErrorCode.NONE, hw, log_start)
    try:
        # KIP-74: the first batch of the response comes whole even past the limits.
        result = partition.log.read(offset, max(limit, 1), max_offset=readable)
    except OffsetOutOfRange:
        return _empty(index, ErrorCode.OFFSET_OUT_OF_RANGE, hw, log_start)
    entry = _empty(index, ErrorCode.NONE, hw, log_start)
    entry["records"] = result.regions
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


def _record_follower(ctx: BrokerContext, body: dict) -> None:
    """A follower fetches from its log end: the leader learns how far each follower is
    (moving the high watermark, letting it back into the ISR)."""
    replica_id = body["replica_id"]
    for topic in body["topics"]:
        for preq in topic["partitions"]:
            partition = ctx.replicas.get(topic["topic"], preq["partition"])
            if partition is None or not partition.is_leader:
                continue
            # A fetch from an older leader epoch (sent before the controller's last
            # decision, e.g. by a broker stopping) is refused below: it must not count.
            epoch = preq.get("current_leader_epoch", -1)
            if epoch in (-1, partition.leader_epoch):
                ctx.replicas.follower_fetched(partition, replica_id, preq["fetch_offset"])


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


def partitions_of(body: dict) -> list[tuple[str, int]]:
    """The partitions whose appends should wake a waiting fetch."""
    return [(t["topic"], p["partition"]) for t in body["topics"] for p in t["partitions"]]


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
