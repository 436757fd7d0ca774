"""CreatePartitions: more partitions for existing topics (never fewer). The added
partitions' replicas continue the topic's placement, or are the ones the request names;
the answer waits until the metadata cache shows them with leaders, at most `timeout_ms`
(then REQUEST_TIMED_OUT: the creation goes on). Keyed records of the topic then map to
other partitions: that is the user's to weigh, as in Kafka."""

from __future__ import annotations

from broker.cluster import TopicError
from broker.protocol.apis import CREATE_PARTITIONS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed
from broker.server.context import BrokerContext
from broker.server.handlers.answers import topic_results
from broker.server.handlers.base import ApiHandler, Delayed, run_async
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Delayed:
    refused = {
        t["name"]
        for t in body["topics"]
        if not allowed(ctx, request, Operation.ALTER, ResourceType.TOPIC, t["name"])
    }
    return run_async(ctx, _create(ctx, body, refused))


async def _create(ctx: BrokerContext, body: dict, refused: set[str]) -> dict:
    names = [t["name"] for t in body["topics"]]
    duplicated = {n for n in names if names.count(n) > 1} | refused
    asked = [
        (
            t["name"],
            t["count"],
            None if t["assignments"] is None else [a["broker_ids"] for a in t["assignments"]],
        )
        for t in body["topics"]
        if t["name"] not in duplicated
    ]
    outcome = await ctx.admin.create_partitions(asked, body["validate_only"])
    for name in duplicated - refused:
        outcome[name] = TopicError(ErrorCode.INVALID_REQUEST, f"Duplicate topic in request: {name}")
    for name in refused:
        outcome[name] = TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    counts = {t: count for t, count, _ in asked}
    created = [t for t, _, _ in asked if outcome.get(t) is None]
    timed_out: set[str] = set()
    if created and not body["validate_only"] and body["timeout_ms"] > 0:

        def done(topic: str) -> bool:
            return ctx.metadata.partition_count(topic) >= counts[topic] and (
                ctx.metadata.has_leaders(topic)
            )

        timed_out = await ctx.admin.wait_until(created, done, body["timeout_ms"])
    for name in timed_out:
        outcome[name] = TopicError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"The partitions of '{name}' are being created; their leaders were not "
            f"elected within {body['timeout_ms']} ms.",
        )
    return {"throttle_time_ms": 0, "results": topic_results(dict.fromkeys(names), outcome)}


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "results": topic_results([t["name"] for t in body["topics"]], {}, code),
    }


HANDLER = ApiHandler(CREATE_PARTITIONS_API, handle, error_response)
