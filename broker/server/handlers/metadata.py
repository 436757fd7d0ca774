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

NO_AUTHORIZED_OPERATIONS = -(2**31)  # "not asked for", as Kafka answers


def _topic_entry(broker, name: str, auto_created: set[str], listener: str) -> dict:
    partitions = broker.metadata.topics.get(name)
    if partitions is None:
        if not is_legal_topic_name(name):
            code = ErrorCode.INVALID_TOPIC_EXCEPTION
        elif name in auto_created:
            code = ErrorCode.LEADER_NOT_AVAILABLE
        else:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return {"error_code": code, "name": name, "is_internal": False, "partitions": []}
    return {
        "error_code": ErrorCode.NONE,
        "name": name,
        "is_internal": name in broker.metadata.internal_topics,
        "partitions": [
            _partition_entry(broker, p, listener)
            for p in sorted(partitions.values(), key=lambda s: s.partition)
        ],
        "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }


def _partition_entry(broker, p, listener: str) -> dict:
    leader, code = p.leader, ErrorCode.NONE
    if not broker.metadata.is_online(p):  # no leader, or its broker is gone
        leader, code = -1, ErrorCode.LEADER_NOT_AVAILABLE
    elif broker.metadata.brokers[leader].address(listener) is None:
        leader, code = -1, ErrorCode.LISTENER_NOT_FOUND
    return {
        "error_code": code,
        "partition_index": p.partition,
        "leader_id": leader,
        "leader_epoch": p.leader_epoch,
        "replica_nodes": list(p.replicas),
        "isr_nodes": list(p.isr),
        "offline_replicas": list(p.offline_replicas),
    }


def _brokers(broker, listener: str) -> list[dict]:
    """The live brokers with an endpoint on the listener the request came in on."""
    found = []
    for b in sorted(broker.metadata.brokers.values(), key=lambda b: b.node_id):
        address = b.address(listener)
        if address is not None:
            found.append({"node_id": b.node_id, "host": address[0], "port": address[1],
                          "rack": b.rack})  # fmt: skip
    return found


def handle(broker, request, body: dict) -> dict:
    requested = body.get("topics")
    listener = request.session.listener
    auto_created: set[str] = set()
    # v0 asks for every topic with an empty list; v1+ with null.
    if requested is None or (request.api_version == 0 and not requested):
        names = sorted(broker.metadata.topics)
    else:
        names = [t["name"] for t in requested]
        auto = broker.config["auto.create.topics.enable"] and body.get(
            "allow_auto_topic_creation", True
        )
        for name in names:
            if auto and name not in broker.metadata.topics and is_legal_topic_name(name):
                # A single broker has it at once; in a cluster the controller will, and
                # the answer says LEADER_NOT_AVAILABLE meanwhile, as Kafka's does.
                broker.admin.auto_create(name)
                auto_created.add(name)
    return {
        "throttle_time_ms": 0,
        "brokers": _brokers(broker, listener),
        "cluster_id": broker.metadata.cluster_id,
        "controller_id": broker.metadata.controller_id,
        "topics": [_topic_entry(broker, n, auto_created, listener) for n in names],
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
