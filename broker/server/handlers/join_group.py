"""JoinGroup: a member joins its group (or rejoins for the next generation).

The answer waits until the rebalance completes (broker/coordinator/coordinator.py); v4+
first answers a new dynamic member MEMBER_ID_REQUIRED with its id (KIP-394).
"""

from __future__ import annotations

from broker.coordinator.coordinator import JoinRequest, JoinResult
from broker.protocol.apis import JOIN_GROUP_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.base import Answer, ApiHandler, respond
from broker.server.handlers.groups import coordinator_or_error, group_client_host
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    groups = coordinator_or_error(ctx)
    if isinstance(groups, ErrorCode):
        return error_response(body, groups)
    rebalance_timeout = body["rebalance_timeout_ms"]
    result = groups.join_group(
        JoinRequest(
            group_id=body["group_id"],
            member_id=body["member_id"],
            group_instance_id=body["group_instance_id"],
            client_id=request.client_id or "",
            client_host=group_client_host(request),
            session_timeout_ms=body["session_timeout_ms"],
            # v0 has no rebalance timeout: the session timeout stands for it.
            rebalance_timeout_ms=rebalance_timeout
            if rebalance_timeout >= 0
            else body["session_timeout_ms"],
            protocol_type=body["protocol_type"],
            protocols=[(p["name"], p["metadata"]) for p in body["protocols"]],
            require_known_member_id=request.api_version >= 4 and body["group_instance_id"] is None,
        )
    )
    return respond(result, lambda r: _body(r, request.api_version))


def _body(result: JoinResult, version: int) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        # Without a protocol (an error): null from v7, before an empty name.
        "protocol_name": result.protocol_name
        if result.protocol_name is not None or version >= 7
        else "",
        "leader": result.leader_id,
        "member_id": result.member_id,
        "members": [
            {"member_id": m, "group_instance_id": i, "metadata": metadata}
            for m, i, metadata in result.members
        ],
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return _body(JoinResult(code, body["member_id"]), version=0)


HANDLER = ApiHandler(JOIN_GROUP_API, handle, error_response)
