"""UpdateMetadata (controller -> every broker): the live brokers and partition states the
metadata cache serves. From an older controller (or for an earlier registration of this
broker) it is refused and changes nothing."""

from __future__ import annotations

from broker.cluster import SECURITY_PROTOCOL_NAMES, BrokerRegistration, Endpoint
from broker.protocol.apis import UPDATE_METADATA_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.handlers.leader_and_isr import check_controller
from broker.server.metadata import PartitionState
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    refused = check_controller(ctx, body)
    if refused is not None:
        return error_response(body, refused)
    brokers = [
        BrokerRegistration(live["id"], endpoints, live["rack"])
        for live in body["live_brokers"]
        if (endpoints := tuple(_endpoint(e) for e in live["endpoints"]))
    ]
    partitions = [
        PartitionState(
            topic["topic_name"],
            p["partition_index"],
            p["leader"],
            p["leader_epoch"],
            tuple(p["replicas"]),
            tuple(p["isr"]),
            tuple(p["offline_replicas"]),
            p["controller_epoch"],
            p["zk_version"],
        )
        for topic in body["topic_states"]
        for p in topic["partition_states"]
    ]
    ctx.metadata.update(body["controller_id"], body["controller_epoch"], brokers, partitions)
    return {"error_code": ErrorCode.NONE}


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"error_code": code}


HANDLER = ApiHandler(UPDATE_METADATA_API, handle, error_response)


def _endpoint(e: dict) -> Endpoint:
    # An id no Kafka release uses is kept as its number: only the address is served.
    protocol = SECURITY_PROTOCOL_NAMES.get(e["security_protocol"], str(e["security_protocol"]))
    return Endpoint(e["listener"], e["host"], e["port"], protocol)
