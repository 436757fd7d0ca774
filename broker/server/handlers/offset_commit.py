"""OffsetCommit: store a group's consumed positions in __consumer_offsets.

Answered once the records are replicated (or at once for partitions refused: unknown
topic, metadata too long, a member or generation the group does not have).
"""

from __future__ import annotations

from broker.coordinator.offsets_topic import CommittedOffset
from broker.protocol.apis import OFFSET_COMMIT_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed, refused_partitions
from broker.server.context import BrokerContext
from broker.server.handlers.answers import partition_errors
from broker.server.handlers.base import Answer, ApiHandler, respond
from broker.server.handlers.groups import coordinator_or_error
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    groups = coordinator_or_error(ctx)
    if isinstance(groups, ErrorCode):
        return error_response(body, groups)
    if not allowed(ctx, request, Operation.READ, ResourceType.GROUP, body["group_id"]):
        return error_response(body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    refused = refused_partitions(ctx, request, Operation.READ, body["topics"])
    now = ctx.now_ms()
    retention = body["retention_time_ms"]
    offsets: dict[tuple[str, int], CommittedOffset] = {}
    for topic in body["topics"]:
        for p in topic["partitions"]:
            if (topic["name"], p["partition_index"]) in refused:
                continue
            offsets[(topic["name"], p["partition_index"])] = CommittedOffset(
                offset=p["committed_offset"],
                leader_epoch=p["committed_leader_epoch"],
                metadata=p["committed_metadata"] or "",
                commit_timestamp_ms=now,
                # v2-v4 may ask for a retention of their own (-1: the broker's).
                expire_timestamp_ms=now + retention if retention >= 0 else None,
            )
    result = groups.commit_offsets(
        body["group_id"],
        body["generation_id_or_member_epoch"],
        body["member_id"],
        body["group_instance_id"],
        offsets,
    )
    return respond(result, lambda errors: commit_answer(body, {**errors, **refused}))


def commit_answer(body: dict, errors: dict[tuple[str, int], ErrorCode]) -> dict:
    """OffsetCommit's answer, also TxnOffsetCommit's (the same shape): a code per partition."""
    return {"throttle_time_ms": 0, "topics": partition_errors(body["topics"], errors)}


def error_response(body: dict, code: ErrorCode) -> dict:
    every = {
        (t["name"], p["partition_index"]): code for t in body["topics"] for p in t["partitions"]
    }
    return commit_answer(body, every)


HANDLER = ApiHandler(OFFSET_COMMIT_API, handle, error_response)
