"""TxnOffsetCommit: a transactional producer's consumed offsets, written to the group's
__consumer_offsets partition inside its transaction (docs/contracts/consumer-groups.md,
"Transactional offsets"). Answered once the records are replicated; the offsets stay
pending, invisible to OffsetFetch, until the transaction's marker commits or aborts
them.

Kafka's checks, in its order: WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (GROUP_AUTHORIZATION_FAILED),
each for every partition; then READ per topic (TOPIC_AUTHORIZATION_FAILED for its
partitions, the others go on).
"""

from __future__ import annotations

from broker.coordinator.offsets_topic import CommittedOffset
from broker.protocol.apis import TXN_OFFSET_COMMIT_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed, refused_partitions
from broker.server.context import BrokerContext
from broker.server.handlers.base import Answer, ApiHandler, respond
from broker.server.handlers.groups import coordinator_or_error
from broker.server.handlers.offset_commit import commit_answer, error_response
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    groups = coordinator_or_error(ctx)
    if isinstance(groups, ErrorCode):
        return error_response(body, groups)
    if not allowed(
        ctx, request, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, body["transactional_id"]
    ):
        return error_response(body, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not allowed(ctx, request, Operation.READ, ResourceType.GROUP, body["group_id"]):
        return error_response(body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    refused = refused_partitions(ctx, request, Operation.READ, body["topics"])
    now = ctx.now_ms()
    offsets = {
        (topic["name"], p["partition_index"]): CommittedOffset(
            offset=p["committed_offset"],
            leader_epoch=p["committed_leader_epoch"],
            metadata=p["committed_metadata"] or "",
            commit_timestamp_ms=now,
        )
        for topic in body["topics"]
        for p in topic["partitions"]
        if (topic["name"], p["partition_index"]) not in refused
    }
    if not offsets:
        return commit_answer(body, refused)
    result = groups.commit_txn_offsets(
        body["group_id"],
        (body["producer_id"], body["producer_epoch"]),
        body["generation_id"],
        body["member_id"],
        body["group_instance_id"],
        offsets,
    )
    return respond(result, lambda errors: commit_answer(body, {**errors, **refused}))


HANDLER = ApiHandler(TXN_OFFSET_COMMIT_API, handle, error_response)
