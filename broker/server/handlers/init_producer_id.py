"""InitProducerId for idempotent (non-transactional) producers.

Transactions are not implemented: a transactional id is refused rather than silently
treated as idempotent-only, since the client would then believe in guarantees it lacks.
"""

from __future__ import annotations

from broker.protocol.apis import INIT_PRODUCER_ID_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed, allowed_on_any, refused_code
from broker.server.context import BrokerContext
from broker.server.handlers.base import Answer, ApiHandler, run_async
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    transactional_id = body.get("transactional_id")
    if transactional_id:
        refused = refused_code(
            ctx, request, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
        )
        return error_response(body, refused or ErrorCode.INVALID_REQUEST)
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


async def _answer_later(ctx: BrokerContext) -> dict:
    return _answer(await ctx.producer_ids.next_id())


def _answer(pid: int) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "producer_id": pid,
        "producer_epoch": 0,
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}


HANDLER = ApiHandler(INIT_PRODUCER_ID_API, handle, error_response)
