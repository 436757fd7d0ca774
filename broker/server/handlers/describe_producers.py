"""DescribeProducers (KIP-664): the producers a partition leader knows, from its producer
state (broker/server/producer_state.py): epoch, last sequence and timestamp, the epoch of
the coordinator that wrote its last marker here, and the first offset of its open
transaction. What `kafka-transactions describe-producers` / `find-hanging` read
(docs/contracts/transactions.md, "Tools and visibility"). READ on each topic, as Kafka.
"""

from __future__ import annotations

from broker.protocol.apis import DESCRIBE_PRODUCERS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import refused_code
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    topics = []
    for topic in body["topics"]:
        refused = refused_code(ctx, request, Operation.READ, ResourceType.TOPIC, topic["name"])
        partitions = [
            _partition(ctx, topic["name"], index, refused) for index in topic["partition_indexes"]
        ]
        topics.append({"name": topic["name"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


def _partition(ctx: BrokerContext, topic: str, index: int, refused: ErrorCode) -> dict:
    if refused != ErrorCode.NONE:
        return _error(index, refused)
    partition = ctx.replicas.get(topic, index)
    if partition is None or not partition.is_leader:
        known = ctx.metadata.partition(topic, index) is not None
        return _error(
            index,
            ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        )
    table = partition.producers
    return {
        "partition_index": index,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "active_producers": [
            {
                "producer_id": pid,
                "producer_epoch": entry.epoch,
                "last_sequence": entry.last_seq if entry.last_seq is not None else -1,
                "last_timestamp": entry.batches[-1].timestamp if entry.batches else -1,
                "coordinator_epoch": entry.coordinator_epoch,
                "current_txn_start_offset": table.ongoing.get(pid, -1),
            }
            for pid, entry in sorted(table.producers.items())
        ],
    }


def _error(index: int, code: ErrorCode) -> dict:
    return {
        "partition_index": index,
        "error_code": code,
        "error_message": None,
        "active_producers": [],
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"name": t["name"], "partitions": [_error(i, code) for i in t["partition_indexes"]]}
            for t in body["topics"]
        ],
    }


HANDLER = ApiHandler(DESCRIBE_PRODUCERS_API, handle, error_response)
