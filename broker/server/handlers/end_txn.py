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
from broker.server.request import RequestContext
from broker.transactions.coordinator import EndTxnRequest, for_version


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    if ctx.transactions is None:
        return error_response(body, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    req = EndTxnRequest(
        body["transactional_id"], body["producer_id"], body["producer_epoch"], body["committed"]
    )
    return respond(
        ctx.transactions.end_txn(req),
        lambda decision: error_response(
            body, for_version(END_TXN_API.key, request.api_version, decision.error)
        ),
    )


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": code}


HANDLER = ApiHandler(END_TXN_API, handle, error_response)
