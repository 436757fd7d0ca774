"""EndTxn: commit or abort a producer's open transaction. The answer comes once
PrepareCommit/PrepareAbort is replicated; the markers then go out to the partitions'
leaders and the transaction completes in the background (a retry meanwhile is
CONCURRENT_TRANSACTIONS). WRITE on the transactional id is the dispatcher's check;
errors per docs/contracts/transactions.md.
"""

from __future__ import annotations

from broker.protocol.apis import END_TXN_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.base import Answer, ApiHandler, respond
from broker.server.producer_ids import NoIdAtHand, allocate_now
from broker.server.request import RequestContext
from broker.transactions.coordinator import EndTxnRequest, for_version

# From v5 the client speaks transaction version 2 (KIP-890 part 2): the end bumps the
# producer epoch and the answer names the id and epoch to go on with (Kafka decides by
# the request's version alone).
TV2_SINCE = 5


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    if ctx.transactions is None:
        return error_response(body, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    req = EndTxnRequest(
        body["transactional_id"],
        body["producer_id"],
        body["producer_epoch"],
        body["committed"],
        client_tv=2 if request.api_version >= TV2_SINCE else 0,
    )

    def build(decision) -> dict:
        code = for_version(END_TXN_API.key, request.api_version, decision.error)
        answer = error_response(body, code)
        if code == ErrorCode.NONE:
            answer["producer_id"] = decision.producer_id
            answer["producer_epoch"] = decision.producer_epoch
        return answer

    try:
        # An id is needed only when the epoch overflows.
        return respond(ctx.transactions.end_txn(req, lambda: allocate_now(ctx.producer_ids)), build)
    except NoIdAtHand:
        # Nothing changed (the id is asked for first); the client retries.
        return error_response(body, ErrorCode.COORDINATOR_NOT_AVAILABLE)


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}


HANDLER = ApiHandler(END_TXN_API, handle, error_response)
