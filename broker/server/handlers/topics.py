"""CreateTopics and DeleteTopics."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.server.replica_manager import TopicError


def create(ctx, header, request: dict) -> dict:
    results = []
    for topic in request["topics"]:
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
                partitions = ctx.config["num.partitions"]
            if factor == -1:
                factor = ctx.config["default.replication.factor"]
            configs = {c["name"]: c["value"] for c in topic["configs"]}
            ctx.replicas.create_topic(
                name, partitions, factor, configs, request.get("validate_only", False)
            )
        except TopicError as exc:
            code, message = exc.code, exc.message
        results.append({"name": name, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "topics": results}


def create_error_response(request: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"name": t["name"], "error_code": code, "error_message": None}
            for t in request["topics"]
        ],
    }


def delete(ctx, header, request: dict) -> dict:
    results = []
    for name in request["topic_names"]:
        code, message = ErrorCode.NONE, None
        if not ctx.config["delete.topic.enable"]:
            code, message = ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."
        else:
            try:
                ctx.replicas.delete_topic(name)
            except TopicError as exc:
                code, message = exc.code, exc.message
        results.append({"name": name, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "responses": results}


def delete_error_response(request: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "responses": [
            {"name": n, "error_code": code, "error_message": None} for n in request["topic_names"]
        ],
    }
