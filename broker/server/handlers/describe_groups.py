"""DescribeGroups: state, protocol and members of groups this broker coordinates.

Member metadata and assignments (the bytes the clients exchanged) are shown only while
the group is Stable, as Kafka does; a group the coordinator does not have is reported
Dead with no members (v0-v5 have no "not found" error)."""

from __future__ import annotations

from broker.coordinator.group import GroupState
from broker.protocol.apis import DESCRIBE_GROUPS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed, authorized_operations
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.handlers.groups import coordinator_or_error
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    groups = coordinator_or_error(ctx)
    if isinstance(groups, ErrorCode):
        return error_response(body, groups)
    return {
        "throttle_time_ms": 0,
        "groups": [_authorized_describe(ctx, request, groups, g, body) for g in body["groups"]],
    }


def _authorized_describe(
    ctx: BrokerContext, request: RequestContext, groups, group_id: str, body: dict
) -> dict:
    if not allowed(ctx, request, Operation.DESCRIBE, ResourceType.GROUP, group_id):
        return _empty(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    described = _describe(groups, group_id)
    if body.get("include_authorized_operations"):
        described["authorized_operations"] = authorized_operations(
            ctx, request, ResourceType.GROUP, group_id
        )
    return described


def _describe(groups, group_id: str) -> dict:
    code, group = groups.describe_group(group_id)
    if code != ErrorCode.NONE:
        return _empty(group_id, code)
    if group is None:
        return _empty(group_id, ErrorCode.NONE)
    stable = group.state is GroupState.STABLE
    return {
        "error_code": ErrorCode.NONE,
        "group_id": group_id,
        "group_state": group.state.value,
        "protocol_type": group.protocol_type or "",
        "protocol_data": (group.protocol_name or "") if stable else "",
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                "member_assignment": m.assignment if stable else b"",
            }
            for m in group.members.values()
        ],
    }


def _empty(group_id: str, code: ErrorCode) -> dict:
    return {
        "error_code": code,
        "group_id": group_id,
        "group_state": GroupState.DEAD.value,
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "groups": [_empty(g, code) for g in body["groups"]]}


HANDLER = ApiHandler(DESCRIBE_GROUPS_API, handle, error_response)
