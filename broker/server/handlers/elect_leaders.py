"""ElectLeaders: the controller makes each partition's preferred replica its leader again
(election type 0, or v0), or elects any live replica of a partition without a leader
(type 1, unclean: acknowledged writes may be lost). Answered by the active controller
(NOT_CONTROLLER elsewhere; clients send it there); a single broker's partitions have one
replica each, already leading (ELECTION_NOT_NEEDED). Asking for no partitions (null)
means all of them, and the answer then leaves out those that needed nothing."""

from __future__ import annotations

from broker.cluster import NotController
from broker.protocol.apis import ELECT_LEADERS_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.answers import by_topic
from broker.server.handlers.base import Answer, ApiHandler, run_async
from broker.server.request import RequestContext

UNCLEAN = 1


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    asked = (
        None
        if body["topic_partitions"] is None
        else [(t["topic"], p) for t in body["topic_partitions"] for p in t["partitions"]]
    )
    unclean = body["election_type"] == UNCLEAN
    if ctx.cluster is None:
        return _body(body, _single_broker(ctx, asked))
    controller = ctx.cluster.controller
    if controller is None or not controller.is_active:
        return error_response(body, ErrorCode.NOT_CONTROLLER)
    return run_async(ctx, _elect(controller, body, asked, unclean))


def _single_broker(ctx: BrokerContext, asked) -> dict:
    partitions = asked
    if partitions is None:
        partitions = [(t, p) for t, ps in ctx.metadata.topics.items() for p in ps]
    return {
        tp: (
            (ErrorCode.ELECTION_NOT_NEEDED, None)
            if ctx.metadata.partition(*tp) is not None
            else (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        )
        for tp in partitions
    }


async def _elect(controller, body, asked, unclean: bool) -> dict:
    try:
        results = await controller.elect_leaders(asked, unclean)
    except NotController:
        return error_response(body, ErrorCode.NOT_CONTROLLER)
    return _body(body, results)


def _body(body: dict, results: dict) -> dict:
    if body["topic_partitions"] is None:
        results = {tp: r for tp, r in results.items() if r[0] != ErrorCode.ELECTION_NOT_NEEDED}
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "replica_election_results": by_topic(
            results,
            lambda partition, result: {
                "partition_id": partition,
                "error_code": result[0],
                "error_message": result[1],
            },
            topic_key="topic",
            partitions_key="partition_result",
        ),
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    # v0 has no request-level error: every partition asked for carries it.
    asked = [(t["topic"], p) for t in body["topic_partitions"] or [] for p in t["partitions"]]
    answer = _body({"topic_partitions": []}, {tp: (code, None) for tp in asked})
    answer["error_code"] = code
    return answer


HANDLER = ApiHandler(ELECT_LEADERS_API, handle, error_response)
