"""WriteTxnMarkers (transaction coordinator -> partition leaders, inter-broker): append a
COMMIT or ABORT marker for each named producer to each named partition.

Each marker is a control batch (broker/records/control.py) appended as leader, with
what a Produce with acks=all promises: the partition's answer waits in the produce
purgatory until every in-sync replica has the marker (docs/contracts/transactions.md,
"Markers", for the codes and what the coordinator does with each). The producer's state
at the partition decides whether the marker is still wanted: an older producer epoch is
INVALID_PRODUCER_EPOCH, an older coordinator epoch TRANSACTION_COORDINATOR_FENCED.
"""

from __future__ import annotations

from broker.coordinator.offsets_topic import OFFSETS_TOPIC
from broker.protocol.apis import WRITE_TXN_MARKERS_API
from broker.protocol.errors import ErrorCode
from broker.records.control import build_marker
from broker.records.header import parse_header
from broker.server.appends import replication_outcome
from broker.server.context import BrokerContext
from broker.server.handlers.base import Answer, ApiHandler, Delayed
from broker.server.request import RequestContext
from broker.util.purgatory import DelayedOperation

# How long a marker waits for the in-sync replicas: Kafka's request.timeout.ms default,
# which its marker appends use. The coordinator resends what timed out.
REPLICATION_TIMEOUT_MS = 30_000


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    now = ctx.now_ms()
    markers = []
    waiting = []  # (partition key, its answer, the offset the high watermark must pass)
    for marker in body["markers"]:
        topics = []
        for topic in marker["topics"]:
            partitions = []
            for index in topic["partition_indexes"]:
                answer = {"partition_index": index, "error_code": ErrorCode.NONE}
                next_offset = _append(ctx, marker, topic["name"], index, now, answer)
                if next_offset >= 0:
                    waiting.append(((topic["name"], index), answer, next_offset))
                partitions.append(answer)
            topics.append({"name": topic["name"], "partitions": partitions})
        markers.append({"producer_id": marker["producer_id"], "topics": topics})
    response = {"markers": markers}
    if not waiting:
        return response
    operation = DelayedMarkers(ctx, response, waiting, now + REPLICATION_TIMEOUT_MS)
    operation.add_done_callback(lambda answered: _offsets_transactions_ended(ctx, body, answered))
    if ctx.produce_purgatory.try_complete_else_watch(operation, now):
        return operation.result
    return Delayed(operation)


def _append(ctx: BrokerContext, marker: dict, topic: str, index: int, now: int, answer) -> int:
    """Append one marker; the offset after it, or -1 with the error set in `answer`."""
    partition = ctx.replicas.get(topic, index)
    if partition is None:
        # Known to the cluster but not hosted here: the coordinator's metadata is stale.
        known = ctx.metadata.partition(topic, index) is not None
        answer["error_code"] = (
            ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        return -1
    batch = bytearray(
        build_marker(
            marker["producer_id"],
            marker["producer_epoch"],
            marker["transaction_result"],
            marker["coordinator_epoch"],
            now,
        )
    )
    result = partition.append_as_leader(batch, [(0, parse_header(batch))], now, acks=-1)
    if result.error != ErrorCode.NONE:
        answer["error_code"] = result.error
        return -1
    # Followers waiting at this leader fetch the marker now; read_committed fetchers
    # waiting for the last stable offset look again.
    ctx.partition_changed(topic, index)
    return result.next_offset


class DelayedMarkers(DelayedOperation):
    """The answer waits until the high watermark passed every appended marker, or until
    REPLICATION_TIMEOUT_MS (then REQUEST_TIMED_OUT for those still waiting: resent)."""

    def __init__(self, ctx: BrokerContext, response: dict, waiting: list, deadline_ms: int):
        super().__init__(deadline_ms, {tp for tp, _, _ in waiting})
        self.ctx = ctx
        self.response = response
        self.waiting = waiting

    def try_complete(self, now_ms: int) -> bool:
        still = []
        for tp, answer, next_offset in self.waiting:
            outcome = replication_outcome(self.ctx, tp, next_offset)
            if outcome is None:
                still.append((tp, answer, next_offset))
            else:
                answer["error_code"] = outcome[0]
        self.waiting = still
        return not still and self.complete(self.response)

    def on_expiration(self, now_ms: int) -> dict:
        for _, answer, _ in self.waiting:
            answer["error_code"] = ErrorCode.REQUEST_TIMED_OUT
        return self.response


def _offsets_transactions_ended(ctx: BrokerContext, body: dict, response: dict) -> None:
    """Markers replicated on __consumer_offsets partitions end the producers'
    transactional offset commits there: the group coordinator applies or drops them
    (docs/contracts/consumer-groups.md, "Transactional offsets")."""
    if ctx.groups is None:
        return
    for asked, answered in zip(body["markers"], response["markers"], strict=True):
        for topic in answered["topics"]:
            if topic["name"] != OFFSETS_TOPIC:
                continue
            for p in topic["partitions"]:
                if p["error_code"] == ErrorCode.NONE:
                    ctx.groups.complete_transaction(
                        p["partition_index"], asked["producer_id"], asked["transaction_result"]
                    )


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "markers": [
            {
                "producer_id": m["producer_id"],
                "topics": [
                    {
                        "name": t["name"],
                        "partitions": [
                            {"partition_index": i, "error_code": code}
                            for i in t["partition_indexes"]
                        ],
                    }
                    for t in m["topics"]
                ],
            }
            for m in body["markers"]
        ]
    }


HANDLER = ApiHandler(WRITE_TXN_MARKERS_API, handle, error_response)
