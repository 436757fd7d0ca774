"""ListTransactions (KIP-664; v1: KIP-994's duration filter): the transactional ids this
broker coordinates, with their producer id and Kafka's state name, filtered by state,
by producer id, and (v1) by how long the open transaction has run. Clients ask every
broker and merge. Ids the principal may not DESCRIBE are left out silently, as Kafka
does; a state name Kafka does not have is listed back in `unknown_state_filters`
(docs/contracts/transactions.md, "Tools and visibility").
"""

from __future__ import annotations

from broker.protocol.apis import LIST_TRANSACTIONS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.request import RequestContext
from broker.transactions.state import TxnState

STATES = {state.kafka_name: state for state in TxnState}


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    if ctx.transactions is None:
        return error_response(body, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    coordinator = ctx.transactions.state
    asked = body["state_filters"] or []
    unknown = [name for name in asked if name not in STATES]
    wanted = {STATES[name] for name in asked if name in STATES}
    if asked and not wanted:
        # Only unknown states asked for: nothing can match.
        return _answer(ErrorCode.NONE, unknown, [])
    producers = set(body["producer_id_filters"] or ())
    duration = body.get("duration_filter", -1)
    now = ctx.now_ms()
    if coordinator.loading:
        # Kafka answers the whole list with the loading error, so that clients retry.
        return error_response(body, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    listed = []
    for owner in coordinator.partitions.values():
        for meta in owner.transactions.values():
            if wanted and meta.state not in wanted:
                continue
            if producers and meta.producer_id not in producers:
                continue
            if duration >= 0 and (meta.start_ms < 0 or now - meta.start_ms <= duration):
                continue
            if not allowed(
                ctx, request, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                meta.transactional_id,
            ):  # fmt: skip
                continue
            listed.append(
                {
                    "transactional_id": meta.transactional_id,
                    "producer_id": meta.producer_id,
                    "transaction_state": meta.state.kafka_name,
                }
            )
    listed.sort(key=lambda t: t["transactional_id"])
    return _answer(ErrorCode.NONE, unknown, listed)


def _answer(code: ErrorCode, unknown: list[str], listed: list[dict]) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "unknown_state_filters": unknown,
        "transaction_states": listed,
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return _answer(code, [], [])


HANDLER = ApiHandler(LIST_TRANSACTIONS_API, handle, error_response)
