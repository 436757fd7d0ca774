"""Metadata: brokers, controller, and topics -- all from the MetadataCache."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.server.replica_manager import TopicError, check_topic_name


def _topic_entry(ctx, name: str) -> dict:
    partitions = ctx.metadata.topics.get(name)
    if partitions is None:
        return {
            "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "name": name,
            "is_internal": False,
            "partitions": [],
        }
    return {
        "error_code": ErrorCode.NONE,
        "name": name,
        "is_internal": name in ctx.metadata.internal_topics,
        "partitions": [
            {
                "error_code": ErrorCode.NONE,
                "partition_index": p.partition,
                "leader_id": p.leader,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": list(p.replicas),
                "isr_nodes": list(p.isr),
                "offline_replicas": list(p.offline_replicas),
            }
            for p in sorted(partitions.values(), key=lambda s: s.partition)
        ],
        "topic_authorized_operations": -2147483648,
    }


def handle(ctx, header, request: dict) -> dict:
    requested = request.get("topics")
    # v0 asks for every topic with an empty list; v1+ with null.
    if requested is None or (header.api_version == 0 and not requested):
        names = sorted(ctx.metadata.topics)
    else:
        names = [t["name"] for t in requested]
        auto = ctx.config["auto.create.topics.enable"] and request.get(
            "allow_auto_topic_creation", True
        )
        for name in names:
            if auto and name not in ctx.metadata.topics:
                try:
                    ctx.replicas.create_topic(
                        name, ctx.config["num.partitions"], ctx.config["default.replication.factor"]
                    )
                except TopicError:
                    pass  # an illegal name is reported below as unknown / invalid
    topics = []
    for name in names:
        entry = _topic_entry(ctx, name)
        if entry["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            try:
                check_topic_name(name)
            except TopicError as exc:
                entry["error_code"] = exc.code
        topics.append(entry)
    return {
        "throttle_time_ms": 0,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in sorted(ctx.metadata.brokers.values(), key=lambda b: b.node_id)
        ],
        "cluster_id": ctx.metadata.cluster_id,
        "controller_id": ctx.metadata.controller_id,
        "topics": topics,
        "cluster_authorized_operations": -2147483648,
    }


def handle_error(request: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "brokers": [],
        "cluster_id": None,
        "controller_id": -1,
        "topics": [
            {"error_code": code, "name": t["name"], "is_internal": False, "partitions": []}
            for t in request.get("topics") or []
        ],
        "cluster_authorized_operations": -2147483648,
    }
