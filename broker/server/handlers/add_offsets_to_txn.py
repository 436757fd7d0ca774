"""AddOffsetsToTxn: a consumer group's offsets join a producer's open transaction (the
group's `__consumer_offsets` partition is added to it, so its marker reaches the offsets
TxnOffsetCommit then writes). WRITE on the transactional id (the dispatcher's check) and
READ on the group; errors as AddPartitionsToTxn (docs/contracts/transactions.md).
"""

from __future__ import annotations

from broker.protocol.apis import ADD_OFFSETS_TO_TXN_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import refused_code
from broker.server.context import BrokerContext
from broker.server.handlers.base import Answer, ApiHandler, respond
from broker.server.request import RequestContext
from broker.transactions.coordinator import AddOffsetsRequest, for_version


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    refused = refused_code(ctx, request, Operation.READ, ResourceType.GROUP, body["group_id"])
    if refused:
        return error_response(body, refused)
    if ctx.transactions is None:
        return error_response(body, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    req = AddOffsetsRequest(
        body["transactional_id"], body["producer_id"], body["producer_epoch"], body["group_id"]
    )
    return respond(
        ctx.transactions.add_offsets(req),
        lambda decision: error_response(
            body, for_version(ADD_OFFSETS_TO_TXN_API.key, request.api_version, decision.error)
        ),
    )


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": code}


HANDLER = ApiHandler(ADD_OFFSETS_TO_TXN_API, handle, error_response)
