"""ListOffsets: -1 latest (the high watermark), -2 earliest (the log start), -3 the record
with the largest timestamp (KIP-734, v7+), T >= 0 the first record whose timestamp is at
least T. Lookups by time answer per record and only below the high watermark; none found
is offset -1. The leader epoch answered is the partition's for -1, the first epoch for -2
and the epoch that appended the record found otherwise (as Kafka). Only the leader
answers (NOT_LEADER_OR_FOLLOWER elsewhere), except to debugging tools (replica id -2).
With isolation_level 1 (read_committed, v2+) the last stable offset takes the high
watermark's place in all of this, as Kafka (docs/contracts/log.md, "Transactions")."""

from __future__ import annotations

from broker.protocol.apis import LIST_OFFSETS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import refused_code
from broker.server.context import BrokerContext
from broker.server.handlers.answers import per_partition
from broker.server.handlers.base import ApiHandler, leader_error
from broker.server.request import RequestContext

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


def _answer(index: int, code: ErrorCode, offset: int = -1, timestamp: int = -1, epoch: int = -1):
    return {
        "partition_index": index,
        "error_code": code,
        "timestamp": timestamp,
        "offset": offset,
        "leader_epoch": epoch,
    }


# Kafka's replica id for debugging tools: may read a follower.
DEBUGGING_REPLICA_ID = -2


READ_COMMITTED = 1


def _partition(
    ctx: BrokerContext, topic: str, req: dict, replica_id: int, isolation_level: int = 0
) -> dict:
    index = req["partition_index"]
    partition = ctx.replicas.get(topic, index)
    # A follower's high watermark and log lag the leader's: clients ask the leader.
    code = leader_error(
        partition,
        req.get("current_leader_epoch", -1),
        any_replica=replica_id == DEBUGGING_REPLICA_ID,
    )
    if code != ErrorCode.NONE:
        return _answer(index, code)
    ts, hw, log = req["timestamp"], partition.high_watermark, partition.log
    if isolation_level == READ_COMMITTED:
        hw = partition.last_stable_offset
    if ts == LATEST:
        return _answer(index, ErrorCode.NONE, hw, epoch=partition.leader_epoch)
    if ts == EARLIEST:
        # The first epoch when it covers the log start, as Kafka (none for an empty log).
        first = log.leader_epochs.earliest_entry()
        covers = first is not None and first.start_offset <= log.log_start_offset
        return _answer(
            index, ErrorCode.NONE, log.log_start_offset, epoch=first.epoch if covers else -1
        )
    if ts == MAX_TIMESTAMP:
        found = log.max_timestamp_and_offset(max_offset=hw)
    elif ts >= 0:
        found = log.offset_for_timestamp(ts, max_offset=hw)
    else:  # -4/-5 are about tiered storage, which has no meaning here
        return _answer(index, ErrorCode.INVALID_REQUEST)
    if found is None:  # Kafka's "unknown offset": -1 everywhere, the epoch too
        return _answer(index, ErrorCode.NONE)
    # The epoch of the leader that appended the record found.
    epoch = log.leader_epochs.epoch_for_offset(found[0])
    return _answer(index, ErrorCode.NONE, found[0], found[1], epoch)


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    refused = {
        t["name"]: refused_code(ctx, request, Operation.DESCRIBE, ResourceType.TOPIC, t["name"])
        for t in body["topics"]
    }

    def answer(topic: str, p: dict) -> dict:
        if refused[topic]:
            return _answer(p["partition_index"], refused[topic])
        return _partition(ctx, topic, p, body["replica_id"], body.get("isolation_level", 0))

    return {"throttle_time_ms": 0, "topics": per_partition(body["topics"], answer)}


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "topics": per_partition(body["topics"], lambda _, p: _answer(p["partition_index"], code)),
    }


HANDLER = ApiHandler(LIST_OFFSETS_API, handle, error_response)
