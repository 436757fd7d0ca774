"""DeleteTopics: each named topic deleted on its own by the broker's topic admin, unless
delete.topic.enable is off; the answer waits until the metadata cache no longer lists
it, at most `timeout_ms` (then REQUEST_TIMED_OUT: the deletion goes on)."""

from __future__ import annotations

from broker.cluster import TopicError
from broker.protocol.apis import DELETE_TOPICS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed
from broker.server.context import BrokerContext
from broker.server.handlers.answers import topic_results
from broker.server.handlers.base import ApiHandler, Delayed, run_async
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Delayed:
    names = list(body["topic_names"])
    refused = {
        n: TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        for n in names
        if not allowed(ctx, request, Operation.DELETE, ResourceType.TOPIC, n)
    }
    return run_async(ctx, _delete(ctx, names, body["timeout_ms"], refused))


async def _delete(
    ctx: BrokerContext, names: list[str], timeout_ms: int, refused: dict[str, TopicError]
) -> dict:
    asked = [n for n in names if n not in refused]
    if not ctx.config["delete.topic.enable"]:
        outcome = {
            name: TopicError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            for name in asked
        }
    else:
        outcome = await ctx.admin.delete_topics(asked)
    deleted = [n for n in asked if outcome.get(n) is None]
    timed_out: set[str] = set()
    if deleted and timeout_ms > 0:
        timed_out = await ctx.admin.wait_until(
            deleted, lambda name: name not in ctx.metadata.topics, timeout_ms
        )
    for name in timed_out:
        outcome[name] = TopicError(ErrorCode.REQUEST_TIMED_OUT, f"Topic '{name}' is being deleted.")
    outcome.update(refused)
    # Refusals are answered merged by name: a name asked twice then gets one answer.
    answered = list(dict.fromkeys(names)) if refused else names
    return {"throttle_time_ms": 0, "responses": topic_results(answered, outcome)}


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "responses": topic_results(body["topic_names"], {}, code)}


HANDLER = ApiHandler(DELETE_TOPICS_API, handle, error_response)
