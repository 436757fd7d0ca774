"""CreateTopics: each topic checked, planned and created on its own (one failure does not
stop the others) by the broker's topic admin (broker/controller/); the answer waits until
the metadata cache shows every created topic with leaders, at most `timeout_ms` (then
REQUEST_TIMED_OUT: the creation goes on). Partitions and replication factor -1 take the
broker's defaults; `assignments` choose the replicas."""

from __future__ import annotations

from broker.cluster import TopicError, TopicSpec
from broker.protocol.apis import CREATE_TOPICS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed
from broker.server.context import BrokerContext
from broker.server.handlers.answers import topic_results
from broker.server.handlers.base import ApiHandler, Delayed, run_async
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Delayed:
    specs = [TopicSpec.from_request(topic) for topic in body["topics"]]
    return run_async(ctx, _create(ctx, request, specs, body))


def _refusals(
    ctx: BrokerContext, request: RequestContext, specs: list[TopicSpec]
) -> dict[str, TopicError]:
    """Kafka's check: CREATE on the cluster, or on each topic. A refusal says nothing of
    whether the topic exists; nor does TOPIC_ALREADY_EXISTS to a principal that may not
    describe the topic (it gets TOPIC_AUTHORIZATION_FAILED, see _create)."""
    if allowed(ctx, request, Operation.CREATE, ResourceType.CLUSTER):
        return {}
    return {
        s.name: TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        for s in specs
        if not allowed(ctx, request, Operation.CREATE, ResourceType.TOPIC, s.name)
    }


async def _create(
    ctx: BrokerContext, request: RequestContext, specs: list[TopicSpec], body: dict
) -> dict:
    validate_only = body.get("validate_only", False)
    refused = _refusals(ctx, request, specs)
    outcome = await ctx.admin.create_topics(
        [s for s in specs if s.name not in refused], validate_only
    )
    for name, error in list(outcome.items()):
        if error is not None and error.code == ErrorCode.TOPIC_ALREADY_EXISTS:
            if not allowed(ctx, request, Operation.DESCRIBE, ResourceType.TOPIC, name):
                outcome[name] = TopicError(
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
                )
    outcome.update(refused)
    created = [s.name for s in specs if outcome.get(s.name) is None]
    timed_out: set[str] = set()
    if created and not validate_only and body["timeout_ms"] > 0:
        timed_out = await ctx.admin.wait_until(
            created, ctx.metadata.has_leaders, body["timeout_ms"]
        )
    for name in timed_out:
        outcome[name] = TopicError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"Topic '{name}' is being created; its leaders were not elected within "
            f"{body['timeout_ms']} ms.",
        )
    return {"throttle_time_ms": 0, "topics": topic_results([s.name for s in specs], outcome)}


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "topics": topic_results([t["name"] for t in body["topics"]], {}, code),
    }


HANDLER = ApiHandler(CREATE_TOPICS_API, handle, error_response)
