"""DeleteTopics: each named topic deleted on its own by the broker's topic admin, unless
delete.topic.enable is off; the answer waits until the metadata cache no longer lists
it, at most `timeout_ms` (then REQUEST_TIMED_OUT: the deletion goes on)."""

from __future__ import annotations

from broker.controller.admin import TopicError
from broker.protocol.apis import DELETE_TOPICS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation, ResourceType
from broker.server.authorization import allowed
from broker.server.context import BrokerContext
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


async def _delete(ctx: BrokerContext, names: list[str], timeout_ms: int, refused: dict) -> dict:
    if refused:
        outcome = await _delete(ctx, [n for n in names if n not in refused], timeout_ms, {})
        by_name = {r["name"]: r for r in outcome["responses"]}
        for name, error in refused.items():
            by_name[name] = {"name": name, "error_code": error.code, "error_message": error.message}
        outcome["responses"] = [by_name[n] for n in dict.fromkeys(names)]
        return outcome
    if not ctx.config["delete.topic.enable"]:
        outcome = {
            name: TopicError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            for name in names
        }
    else:
        outcome = await ctx.admin.delete_topics(names)
    deleted = [n for n in names if outcome.get(n) is None]
    timed_out: set[str] = set()
    if deleted and timeout_ms > 0:
        timed_out = await ctx.admin.wait_until(
            deleted, lambda name: name not in ctx.metadata.topics, timeout_ms
        )
    results = []
    for name in names:
        error = outcome.get(name)
        if error is None and name in timed_out:
            error = TopicError(ErrorCode.REQUEST_TIMED_OUT, f"Topic '{name}' is being deleted.")
        results.append(
            {
                "name": name,
                "error_code": error.code if error else ErrorCode.NONE,
                "error_message": error.message if error else None,
            }
        )
    return {"throttle_time_ms": 0, "responses": results}


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "responses": [
            {"name": n, "error_code": code, "error_message": None} for n in body["topic_names"]
        ],
    }


HANDLER = ApiHandler(DELETE_TOPICS_API, handle, error_response)
