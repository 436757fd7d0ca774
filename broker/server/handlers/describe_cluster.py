"""DescribeCluster: the cluster id, the controller and the live brokers (as Metadata has
them, at the addresses of the listener the request came on). Endpoint type 1 (brokers)
only: controller endpoints (2) are KRaft's, UNSUPPORTED_ENDPOINT_TYPE; no broker is ever
fenced (KRaft's notion too), so asking for fenced brokers adds none."""

from __future__ import annotations

from broker.protocol.apis import DESCRIBE_CLUSTER_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import ResourceType
from broker.server.authorization import NOT_ASKED, authorized_operations
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.request import RequestContext

BROKER_ENDPOINTS = 1


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    if body["endpoint_type"] != BROKER_ENDPOINTS:
        return error_response(body, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE)
    brokers = []
    for b in sorted(ctx.metadata.brokers.values(), key=lambda b: b.broker_id):
        address = b.address(request.session.listener)
        if address is not None:
            brokers.append(
                {"broker_id": b.broker_id, "host": address[0], "port": address[1], "rack": b.rack}
            )
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "endpoint_type": BROKER_ENDPOINTS,
        "cluster_id": ctx.metadata.cluster_id,
        "controller_id": ctx.metadata.controller_id,
        "brokers": brokers,
        "cluster_authorized_operations": authorized_operations(ctx, request, ResourceType.CLUSTER)
        if body["include_cluster_authorized_operations"]
        else NOT_ASKED,
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": None,
        "endpoint_type": BROKER_ENDPOINTS,
        "cluster_id": "",
        "controller_id": -1,
        "brokers": [],
    }


HANDLER = ApiHandler(DESCRIBE_CLUSTER_API, handle, error_response)
