"""OffsetForLeaderEpoch (v0-v3): where a leader epoch ends in this partition's log.

A follower asks for its latest epoch (KIP-101, KIP-279) and truncates its log to the
answer, the point where its log and its leader's diverge. Consumers ask too (KIP-320,
`replica_id` -1 in v3; librdkafka at v2, kafka-python at v3 with us) when their position's
epoch is older than the leader's: an end offset below their position means the log was
truncated under them.

Per partition: the answer is (epoch, end offset) from the log's leader epochs
(`LeaderEpochCache.end_offset_for`, which says what Kafka answers in each case) and the
log end offset; a partition not hosted here is UNKNOWN_TOPIC_OR_PARTITION and
`current_leader_epoch` (v2+) is checked as Fetch does, errors answering (-1, -1).
`replica_id` says who asks and changes nothing. Only the leader answers
(NOT_LEADER_OR_FOLLOWER elsewhere), as Kafka.
"""

from __future__ import annotations

from broker.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from broker.protocol.apis import OFFSET_FOR_LEADER_EPOCH_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed, refused_code
from broker.server.context import BrokerContext
from broker.server.handlers.answers import per_partition
from broker.server.handlers.base import ApiHandler, leader_error
from broker.server.request import RequestContext


def _answer(
    index: int,
    code: ErrorCode,
    epoch: int = UNDEFINED_EPOCH,
    end_offset: int = UNDEFINED_EPOCH_OFFSET,
) -> dict:
    return {"error_code": code, "partition": index, "leader_epoch": epoch, "end_offset": end_offset}


def _partition(ctx: BrokerContext, topic: str, req: dict) -> dict:
    index = req["partition"]
    partition = ctx.replicas.get(topic, index)
    # Only the leader's log is the reference.
    code = leader_error(partition, req["current_leader_epoch"])
    if code != ErrorCode.NONE:
        return _answer(index, code)
    log = partition.log
    epoch, end_offset = log.leader_epochs.end_offset_for(req["leader_epoch"], log.log_end_offset)
    return _answer(index, ErrorCode.NONE, epoch, end_offset)


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    # As Kafka: CLUSTER_ACTION (a follower) may ask about any topic, others need DESCRIBE
    # on each (KIP-320 consumers).
    any_topic = allowed(ctx, request, Operation.CLUSTER_ACTION, ResourceType.CLUSTER)
    refused = {
        t["topic"]: ErrorCode.NONE
        if any_topic
        else refused_code(ctx, request, Operation.DESCRIBE, ResourceType.TOPIC, t["topic"])
        for t in body["topics"]
    }

    def answer(topic: str, p: dict) -> dict:
        if refused[topic]:
            return _answer(p["partition"], refused[topic])
        return _partition(ctx, topic, p)

    return {"throttle_time_ms": 0, "topics": per_partition(body["topics"], answer, "topic")}


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "topics": per_partition(
            body["topics"], lambda _, p: _answer(p["partition"], code), "topic"
        ),
    }


HANDLER = ApiHandler(OFFSET_FOR_LEADER_EPOCH_API, handle, error_response)
