"""DescribeTransactions (KIP-664): the coordinator's state of each transactional id it
owns: Kafka's state name, timeout, start time, producer id and epoch, and the partitions
of the open transaction (while PrepareCommit/PrepareAbort: those still without their
marker). DESCRIBE on each transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an id
this broker does not coordinate is NOT_COORDINATOR, one it does not know
TRANSACTIONAL_ID_NOT_FOUND (docs/contracts/transactions.md, "Tools and visibility").
"""

from __future__ import annotations

from collections import defaultdict

from broker.protocol.apis import DESCRIBE_TRANSACTIONS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import refused_code
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    states = []
    for txn_id in body["transactional_ids"]:
        code = refused_code(ctx, request, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id)
        if code != ErrorCode.NONE:
            states.append(_error(txn_id, code))
            continue
        if ctx.transactions is None:
            states.append(_error(txn_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            continue
        found = ctx.transactions.state.lookup(txn_id)
        if isinstance(found, ErrorCode):
            states.append(_error(txn_id, found))
            continue
        _, meta = found
        if meta is None:
            states.append(_error(txn_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND))
            continue
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, index in sorted(meta.partitions):
            by_topic[topic].append(index)
        states.append(
            {
                "error_code": ErrorCode.NONE,
                "transactional_id": txn_id,
                "transaction_state": meta.state.kafka_name,
                "transaction_timeout_ms": meta.timeout_ms,
                "transaction_start_time_ms": meta.start_ms,
                "producer_id": meta.producer_id,
                "producer_epoch": meta.producer_epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            }
        )
    return {"throttle_time_ms": 0, "transaction_states": states}


def _error(txn_id: str, code: ErrorCode) -> dict:
    return {
        "error_code": code,
        "transactional_id": txn_id,
        "transaction_state": "",
        "transaction_timeout_ms": 0,
        "transaction_start_time_ms": -1,
        "producer_id": -1,
        "producer_epoch": -1,
        "topics": [],
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "transaction_states": [_error(t, code) for t in body["transactional_ids"]],
    }


HANDLER = ApiHandler(DESCRIBE_TRANSACTIONS_API, handle, error_response)
