"""DeleteTopics: each named topic deleted on its own, unless delete.topic.enable is off."""

from __future__ import annotations

from broker.protocol.apis import DELETE_TOPICS_API
from broker.protocol.errors import ErrorCode
from broker.server.handlers.base import ApiHandler
from broker.server.replica_manager import TopicError


def handle(broker, request, body: dict) -> dict:
    results = []
    for name in body["topic_names"]:
        code, message = ErrorCode.NONE, None
        if not broker.config["delete.topic.enable"]:
            code, message = ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."
        else:
            try:
                broker.replicas.delete_topic(name)
            except TopicError as exc:
                code, message = exc.code, exc.message
        results.append({"name": name, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "responses": results}


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "responses": [
            {"name": n, "error_code": code, "error_message": None} for n in body["topic_names"]
        ],
    }


HANDLER = ApiHandler(DELETE_TOPICS_API, handle, error_response)
