"""OffsetFetch: a group's committed offsets (-1 where nothing is committed); null topics
(v2+) ask for every partition the group has committed. Offsets pending in a transaction
are not committed yet (docs/contracts/consumer-groups.md, "Transactional offsets")."""

from __future__ import annotations

from collections import defaultdict

from broker.protocol.apis import OFFSET_FETCH_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.handlers.groups import coordinator_or_error
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    groups = coordinator_or_error(ctx)
    if isinstance(groups, ErrorCode):
        return error_response(body, groups, request.api_version)
    if not allowed(ctx, request, Operation.DESCRIBE, ResourceType.GROUP, body["group_id"]):
        return error_response(body, ErrorCode.GROUP_AUTHORIZATION_FAILED, request.api_version)
    # Topics the principal may not describe: refused when named, left out of "all".
    refused = {
        t["name"]
        for t in body["topics"] or []
        if not allowed(ctx, request, Operation.DESCRIBE, ResourceType.TOPIC, t["name"])
    }
    asked = (
        None
        if body["topics"] is None
        else [
            (t["name"], p)
            for t in body["topics"]
            if t["name"] not in refused
            for p in t["partition_indexes"]
        ]
    )
    code, offsets = groups.fetch_offsets(body["group_id"], asked)
    if code != ErrorCode.NONE:
        return error_response(body, code, request.api_version)
    # v7 require_stable (KIP-447): a partition whose commit is not settled yet (pending
    # in a transaction, or being written) is UNSTABLE_OFFSET_COMMIT, retried by the
    # client; without it the last committed offset is answered.
    unstable = groups.unstable_offsets(body["group_id"], offsets) if body["require_stable"] else ()
    by_topic: dict[str, list[dict]] = defaultdict(list)
    for (topic, partition), committed in offsets.items():
        if asked is None and not allowed(
            ctx, request, Operation.DESCRIBE, ResourceType.TOPIC, topic
        ):
            continue
        if (topic, partition) in unstable:
            committed = None
        by_topic[topic].append(
            {
                "partition_index": partition,
                "committed_offset": -1 if committed is None else committed.offset,
                "committed_leader_epoch": -1 if committed is None else committed.leader_epoch,
                "metadata": "" if committed is None else committed.metadata,
                "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT
                if (topic, partition) in unstable
                else ErrorCode.NONE,
            }
        )
    if refused:
        failed = error_response(body, ErrorCode.TOPIC_AUTHORIZATION_FAILED, version=1)
        for topic in failed["topics"]:
            if topic["name"] in refused:
                by_topic[topic["name"]] = topic["partitions"]
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }


def error_response(body: dict, code: ErrorCode, version: int = 2) -> dict:
    # v2+ carry the error at the top; v1 only per partition.
    topics = [
        {
            "name": t["name"],
            "partitions": [
                {
                    "partition_index": p,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": code,
                }
                for p in t["partition_indexes"]
            ],
        }
        for t in body["topics"] or []
    ]
    return {"throttle_time_ms": 0, "error_code": code, "topics": topics if version < 2 else []}


HANDLER = ApiHandler(OFFSET_FETCH_API, handle, error_response)
