"""TxnOffsetCommit: a transactional producer's consumed offsets, written to the group's
__consumer_offsets partition inside its transaction (docs/contracts/consumer-groups.md,
"Transactional offsets"). Answered once the records are replicated; the offsets stay
pending, invisible to OffsetFetch, until the transaction's marker commits or aborts
them.

Kafka's checks, in its order: WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (GROUP_AUTHORIZATION_FAILED),
each for every partition; then READ per topic (TOPIC_AUTHORIZATION_FAILED for its
partitions, the others go on).

From v5, while `transaction.version` is 2 (KIP-890 part 2), the producer sends no
AddOffsetsToTxn: once the group is found coordinated here, the transaction coordinator is
asked to add the group's offsets partition (AddPartitionsToTxn v5, as for a Produce v12;
broker/transactions/verification.py), and only then are the offsets written.
"""

from __future__ import annotations

from broker.coordinator.coordinator import Waiter
from broker.coordinator.offsets_topic import OFFSETS_TOPIC, CommittedOffset
from broker.protocol.apis import TXN_OFFSET_COMMIT_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed, refused_partitions
from broker.server.context import BrokerContext
from broker.server.handlers.base import Answer, ApiHandler, respond
from broker.server.handlers.groups import coordinator_or_error
from broker.server.handlers.offset_commit import commit_answer, error_response
from broker.server.request import RequestContext
from broker.transactions import verification
from broker.util.purgatory import DelayedOperation, OperationFailed

# The first version of a transaction version 2 producer: its commit adds the group's
# offsets partition to the transaction (KIP-890 part 2).
TV2_SINCE = 5


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

    def commit():
        return groups.commit_txn_offsets(
            body["group_id"],
            (body["producer_id"], body["producer_epoch"]),
            body["generation_id"],
            body["member_id"],
            body["group_instance_id"],
            offsets,
        )

    if _adds_offsets_partition(ctx, request):
        result = _after_add(ctx, request, body, groups, list(offsets), commit)
    else:
        result = commit()
    return respond(result, lambda errors: commit_answer(body, {**errors, **refused}))


def _adds_offsets_partition(ctx: BrokerContext, request: RequestContext) -> bool:
    # As Produce v12: below transaction version 2 a v5 is served as v4.
    return request.api_version >= TV2_SINCE and ctx.config["transaction.version"] >= 2


def _after_add(ctx: BrokerContext, request: RequestContext, body: dict, groups, offsets, commit):
    """The codes per partition (or an operation giving them): the group's status here,
    then the coordinator's add of its offsets partition, then `commit()`'s. A
    transaction that ends meanwhile bumps the epoch (transaction version 2), so the
    write at the old one is fenced by the offsets log: no offsets pending for ever."""
    group_id = body["group_id"]
    status = ErrorCode.INVALID_GROUP_ID if not group_id else groups.manager.status(group_id)
    if status == ErrorCode.NONE and ctx.transactions is None:
        status = ErrorCode.COORDINATOR_NOT_AVAILABLE
    if status != ErrorCode.NONE:
        return dict.fromkeys(offsets, status)
    tp = (OFFSETS_TOPIC, groups.manager.partition_of(group_id))
    asked = ctx.transactions.verifier.verify(
        body["transactional_id"],
        body["producer_id"],
        body["producer_epoch"],
        frozenset({tp}),
        add=True,
    )
    answer = Waiter()

    def added(errors) -> None:
        if isinstance(errors, OperationFailed):
            errors = {tp: ErrorCode.NETWORK_EXCEPTION}
        if tp in errors:
            code = verification.offset_commit_error(errors[tp], request.api_version)
            answer.complete(dict.fromkeys(offsets, code))
            return
        try:
            written = commit()
        except Exception as exc:
            answer.complete(OperationFailed(exc))
            return
        if isinstance(written, DelayedOperation):
            written.add_done_callback(answer.complete)
        else:
            answer.complete(written)

    asked.add_done_callback(added)
    return answer


HANDLER = ApiHandler(TXN_OFFSET_COMMIT_API, handle, error_response)
