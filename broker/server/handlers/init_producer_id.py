"""InitProducerId: a producer id and epoch for an idempotent producer, or, with a
transactional id, from the transaction coordinator (epoch bump, zombie fencing, KIP-360
resumption; docs/contracts/transactions.md).

The transactional answer waits for its state record to be replicated. A cluster broker
may have to wait for a block of producer ids from ZooKeeper first.
"""

from __future__ import annotations

import asyncio

from broker.protocol.apis import INIT_PRODUCER_ID_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed, allowed_on_any, refused_code
from broker.server.context import BrokerContext
from broker.server.handlers.base import Answer, ApiHandler, respond, run_async
from broker.server.producer_ids import NoIdAtHand, allocate_now
from broker.server.request import RequestContext
from broker.transactions.coordinator import InitProducerIdRequest, for_version
from broker.util.purgatory import DelayedOperation


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    transactional_id = body.get("transactional_id")
    if transactional_id is not None:
        refused = refused_code(
            ctx, request, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
        )
        if refused:
            return error_response(body, refused)
        return _transactional(ctx, request, body)
    # An idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic.
    if not (
        allowed(ctx, request, Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)
        or allowed_on_any(ctx, request, Operation.WRITE, ResourceType.TOPIC)
    ):
        return error_response(body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    pid = ctx.producer_ids.allocate()
    if pid is None:  # a cluster broker waiting for its next block of ids from ZooKeeper
        return run_async(ctx, _answer_later(ctx))
    return _answer(pid)


def _transactional(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    if ctx.transactions is None:
        return error_response(body, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    req = InitProducerIdRequest(
        body["transactional_id"],
        body["transaction_timeout_ms"],
        body.get("producer_id", -1),
        body.get("producer_epoch", -1),
    )

    def build(decision) -> dict:
        error = for_version(INIT_PRODUCER_ID_API.key, request.api_version, decision.error)
        if error != ErrorCode.NONE:
            return error_response(body, error)
        return _answer(decision.producer_id, decision.producer_epoch)

    try:
        return respond(
            ctx.transactions.init_producer_id(req, lambda: allocate_now(ctx.producer_ids)), build
        )
    except NoIdAtHand:
        # Nothing was changed (the id is asked for before any change): decide again
        # once an id is at hand.
        async def later() -> dict:
            pid = await ctx.producer_ids.next_id()
            result = ctx.transactions.init_producer_id(req, lambda: pid)
            if not isinstance(result, DelayedOperation):
                return build(result)
            done = asyncio.get_running_loop().create_future()
            result.add_done_callback(done.set_result)
            return build(await done)

        return run_async(ctx, later())


async def _answer_later(ctx: BrokerContext) -> dict:
    return _answer(await ctx.producer_ids.next_id())


def _answer(pid: int, epoch: int = 0) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "producer_id": pid,
        "producer_epoch": epoch,
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}


HANDLER = ApiHandler(INIT_PRODUCER_ID_API, handle, error_response)
