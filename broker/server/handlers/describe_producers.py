"""DescribeProducers (KIP-664): the producers a partition leader tracks, each with its
epoch, last sequence and timestamp, the coordinator epoch of its last marker and the
first offset of its open transaction (-1: none). What `kafka-transactions
find-hanging` reads. Needs READ on the topic (TOPIC_AUTHORIZATION_FAILED); a partition
not hosted here UNKNOWN_TOPIC_OR_PARTITION (NOT_LEADER_OR_FOLLOWER when the cluster has
it), one this broker does not lead NOT_LEADER_OR_FOLLOWER, as Kafka."""

from __future__ import annotations

from broker.protocol.apis import DESCRIBE_PRODUCERS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import refused_code
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler, leader_error
from broker.server.request import RequestContext


def _answer(index: int, code: ErrorCode, producers=()) -> dict:
    return {
        "partition_index": index,
        "error_code": code,
        "error_message": None,
        "active_producers": list(producers),
    }


def _partition(ctx: BrokerContext, topic: str, index: int) -> dict:
    partition = ctx.replicas.get(topic, index)
    if partition is None:
        known = ctx.metadata.partition(topic, index) is not None
        code = ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return _answer(index, code)
    code = leader_error(partition)
    if code != ErrorCode.NONE:
        return _answer(index, code)
    table = partition.producers
    producers = [
        {
            "producer_id": pid,
            "producer_epoch": entry.epoch,
            "last_sequence": -1 if entry.last_seq is None else entry.last_seq,
            "last_timestamp": entry.batches[-1].timestamp if entry.batches else -1,
            "coordinator_epoch": entry.coordinator_epoch,
            "current_txn_start_offset": table.ongoing.get(pid, -1),
        }
        for pid, entry in sorted(table.producers.items())
    ]
    return _answer(index, ErrorCode.NONE, producers)


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    topics = []
    for topic in body["topics"]:
        name = topic["name"]
        refused = refused_code(ctx, request, Operation.READ, ResourceType.TOPIC, name)
        partitions = [
            _answer(i, refused) if refused else _partition(ctx, name, i)
            for i in topic["partition_indexes"]
        ]
        topics.append({"name": name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"name": t["name"], "partitions": [_answer(i, code) for i in t["partition_indexes"]]}
            for t in body["topics"]
        ],
    }


HANDLER = ApiHandler(DESCRIBE_PRODUCERS_API, handle, error_response)
