"""CreateTopics: each topic created (or validated) on its own; one failure does not stop
the others. Partitions and replication factor -1 take the broker's defaults."""

from __future__ import annotations

from broker.protocol.apis import CREATE_TOPICS_API
from broker.protocol.errors import ErrorCode
from broker.server.handlers.base import ApiHandler
from broker.server.replica_manager import TopicError


def handle(broker, request, body: dict) -> dict:
    results = []
    for topic in body["topics"]:
        name = topic["name"]
        code, message = ErrorCode.NONE, None
        try:
            if topic["assignments"]:
                raise TopicError(
                    ErrorCode.INVALID_REQUEST, "Manual replica assignment is not supported yet."
                )
            partitions = topic["num_partitions"]
            factor = topic["replication_factor"]
            if partitions == -1:
                partitions = broker.config["num.partitions"]
            if factor == -1:
                factor = broker.config["default.replication.factor"]
            configs = {c["name"]: c["value"] for c in topic["configs"]}
            broker.replicas.create_topic(
                name, partitions, factor, configs, body.get("validate_only", False)
            )
        except TopicError as exc:
            code, message = exc.code, exc.message
        results.append({"name": name, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "topics": results}


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"name": t["name"], "error_code": code, "error_message": None} for t in body["topics"]
        ],
    }


HANDLER = ApiHandler(CREATE_TOPICS_API, handle, error_response)
