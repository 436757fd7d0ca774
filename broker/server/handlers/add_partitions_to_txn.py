"""AddPartitionsToTxn: partitions join a producer's open transaction (opening it), so the
coordinator knows where to send the COMMIT or ABORT markers.

v0-v3 come from producers: one transaction, WRITE on its transactional id (else every
partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic. v4 (KIP-890) comes
from partition leaders, CLUSTER_ACTION: several transactions at once, each decided as
v0-v3 would be, or, with verify_only, only checked (NONE for partitions in the open
transaction, INVALID_TXN_STATE for the others). Errors per docs/contracts/transactions.md;
the answer waits for the state record to be replicated.
"""

from __future__ import annotations

from broker.coordinator.coordinator import Waiter
from broker.protocol.apis import ADD_PARTITIONS_TO_TXN_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed, refused_code
from broker.server.context import BrokerContext
from broker.server.handlers.answers import by_topic
from broker.server.handlers.base import Answer, ApiHandler, respond
from broker.server.request import RequestContext
from broker.transactions.coordinator import AddPartitionsRequest, Decision, for_version
from broker.util.purgatory import DelayedOperation

KEY = ADD_PARTITIONS_TO_TXN_API.key
# A leader's v5 request without verify_only adds the partitions of a transaction
# version 2 Produce (KIP-890 part 2): the transaction's end will bump the epoch.
TV2_ADD_SINCE = 5


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    if request.api_version >= 4:
        return _batched(ctx, request, body)
    transactional_id = body["v3_and_below_transactional_id"]
    refused = refused_code(
        ctx, request, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    )
    if refused:
        return error_response(body, refused)
    if ctx.transactions is None:
        return error_response(body, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    req = _request(
        transactional_id,
        body["v3_and_below_producer_id"],
        body["v3_and_below_producer_epoch"],
        body["v3_and_below_topics"],
    )
    result = _decide(ctx, request, req, verify_only=False)
    return respond(
        result,
        lambda decision: {
            "throttle_time_ms": 0,
            "results_by_topic_v3_and_below": _results(req, decision, request.api_version),
        },
    )


def _request(
    transactional_id, producer_id, producer_epoch, topics, client_tv=0
) -> AddPartitionsRequest:
    partitions = frozenset((t["name"], p) for t in topics for p in t["partitions"])
    return AddPartitionsRequest(
        transactional_id, producer_id, producer_epoch, partitions, client_tv
    )


def _decide(ctx: BrokerContext, request: RequestContext, req: AddPartitionsRequest, verify_only):
    if verify_only:
        return ctx.transactions.verify_partitions(req)

    def exists(tp) -> bool:
        return ctx.metadata.partition(*tp) is not None

    def authorized(topic: str) -> bool:
        return allowed(ctx, request, Operation.WRITE, ResourceType.TOPIC, topic)

    return ctx.transactions.add_partitions(req, exists, authorized)


def _results(req: AddPartitionsRequest, decision: Decision, version: int) -> list[dict]:
    """Per topic and partition: the decision's codes (refusals found before the
    coordinator was asked, a verification), or after a write its outcome for all."""
    errors = decision.partition_errors
    if errors is None:
        errors = {tp: decision.error for tp in req.partitions}
    return by_topic(
        {tp: for_version(KEY, version, code) for tp, code in errors.items()},
        lambda p, code: {"partition_index": p, "partition_error_code": code},
        partitions_key="results_by_partition",
    )


def _batched(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    if not allowed(ctx, request, Operation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return error_response(body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if ctx.transactions is None:
        return error_response(body, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    requests = []
    client_tv = 2 if request.api_version >= TV2_ADD_SINCE else 0
    for t in body["transactions"]:
        req = _request(
            t["transactional_id"], t["producer_id"], t["producer_epoch"], t["topics"], client_tv
        )
        requests.append((req, _decide(ctx, request, req, t["verify_only"])))
    waiting = [r for _, r in requests if isinstance(r, DelayedOperation)]

    def build(_=None) -> dict:
        results = []
        for req, result in requests:
            decision = result.result if isinstance(result, DelayedOperation) else result
            results.append(
                {
                    "transactional_id": req.transactional_id,
                    "topic_results": _results(req, decision, request.api_version),
                }
            )
        return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": results}

    if not waiting:
        return build()
    return respond(_all_of(waiting), build)


def _all_of(operations: list[DelayedOperation]) -> DelayedOperation:
    """An operation completing once every one of `operations` has."""
    joined = Waiter()
    left = [len(operations)]

    def one_done(_result) -> None:
        left[0] -= 1
        if left[0] == 0:
            joined.complete(None)

    for operation in operations:
        operation.add_done_callback(one_done)
    return joined


def error_response(body: dict, code: ErrorCode) -> dict:
    every = [
        {"name": t["name"], "results_by_partition": [
            {"partition_index": p, "partition_error_code": code} for p in t["partitions"]
        ]}
        for t in body.get("v3_and_below_topics") or []
    ]  # fmt: skip
    per_txn = [
        {"transactional_id": t["transactional_id"], "topic_results": [
            {"name": x["name"], "results_by_partition": [
                {"partition_index": p, "partition_error_code": code} for p in x["partitions"]
            ]} for x in t["topics"]
        ]}
        for t in body.get("transactions") or []
    ]  # fmt: skip
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "results_by_transaction": per_txn,
        "results_by_topic_v3_and_below": every,
    }


HANDLER = ApiHandler(ADD_PARTITIONS_TO_TXN_API, handle, error_response)
