"""Metadata: brokers, controller and topics, all read from the MetadataCache.

A request naming topics that do not exist creates them when `auto.create.topics.enable`
and the request's `allow_auto_topic_creation` both say so (this is where Kafka creates
topics automatically; Produce to an unknown topic answers UNKNOWN_TOPIC_OR_PARTITION).
"""

from __future__ import annotations

from broker.protocol.apis import METADATA_API
from broker.protocol.errors import ErrorCode
from broker.protocol.topic import is_legal_topic_name
from broker.server.handlers.base import ApiHandler
from broker.server.replica_manager import TopicError

NO_AUTHORIZED_OPERATIONS = -(2**31)  # "not asked for", as Kafka answers


def _topic_entry(broker, name: str) -> dict:
    partitions = broker.metadata.topics.get(name)
    if partitions is None:
        code = (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if is_legal_topic_name(name)
            else ErrorCode.INVALID_TOPIC_EXCEPTION
        )
        return {"error_code": code, "name": name, "is_internal": False, "partitions": []}
    return {
        "error_code": ErrorCode.NONE,
        "name": name,
        "is_internal": name in broker.metadata.internal_topics,
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
        "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }


def handle(broker, request, body: dict) -> dict:
    requested = body.get("topics")
    # v0 asks for every topic with an empty list; v1+ with null.
    if requested is None or (request.api_version == 0 and not requested):
        names = sorted(broker.metadata.topics)
    else:
        names = [t["name"] for t in requested]
        auto = broker.config["auto.create.topics.enable"] and body.get(
            "allow_auto_topic_creation", True
        )
        for name in names:
            if auto and name not in broker.metadata.topics:
                try:
                    broker.replicas.create_topic(
                        name,
                        broker.config["num.partitions"],
                        broker.config["default.replication.factor"],
                    )
                except TopicError:
                    pass  # an illegal name is reported below as invalid
    return {
        "throttle_time_ms": 0,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in sorted(broker.metadata.brokers.values(), key=lambda b: b.node_id)
        ],
        "cluster_id": broker.metadata.cluster_id,
        "controller_id": broker.metadata.controller_id,
        "topics": [_topic_entry(broker, name) for name in names],
        "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "brokers": [],
        "cluster_id": None,
        "controller_id": -1,
        "topics": [
            {"error_code": code, "name": t["name"], "is_internal": False, "partitions": []}
            for t in body.get("topics") or []
        ],
        "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }


HANDLER = ApiHandler(METADATA_API, handle, error_response)
