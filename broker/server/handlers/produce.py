"""Produce: validate each partition's batches, check producer sequences, append as leader.

acks=0 gets no response at all; acks=1 is answered after the local append; acks=-1
(all) first needs at least `min.insync.replicas` in the ISR (else NOT_ENOUGH_REPLICAS,
nothing appended), then waits in the produce purgatory until the high watermark passes
the records (a single broker's moves at once). A follower answers NOT_LEADER_OR_FOLLOWER.
Versions 0-2 (old message formats) are advertised so
that clients probing for overlap find Produce, but answered with UNSUPPORTED_VERSION
(docs/contracts/wire-protocol.md).

A transactional producer's batch that would open its transaction at a partition is first
verified with the transaction coordinator (KIP-890 part 1, broker/transactions/
verification.py); the whole request waits for that answer, then appends as above. From
v12, while `transaction.version` is 2 (KIP-890 part 2), the coordinator is asked to add
the partition to the transaction instead: such a producer sends no AddPartitionsToTxn.
"""

from __future__ import annotations

from broker.coordinator.coordinator import Waiter
from broker.protocol.apis import PRODUCE_API
from broker.protocol.errors import ErrorCode
from broker.records.batch import iter_batches
from broker.records.header import ATTRIBUTES_POS, MAGIC_POS, TRANSACTIONAL
from broker.records.validate import RecordsError, validate_append
from broker.security.acl import Operation, ResourceType
from broker.server.appends import replication_outcome
from broker.server.authorization import allowed
from broker.server.context import BrokerContext
from broker.server.handlers.base import NO_RESPONSE, Answer, ApiHandler, Delayed
from broker.server.request import RequestContext
from broker.transactions import verification
from broker.util.purgatory import DelayedOperation, OperationFailed


def _partition_response(
    index: int,
    code: ErrorCode,
    base_offset: int = -1,
    log_start: int = -1,
    message: str | None = None,
    log_append_time_ms: int = -1,
    record_errors: list[tuple[int, str]] = (),
) -> dict:
    return {
        "index": index,
        "error_code": code,
        "base_offset": base_offset,
        "log_append_time_ms": log_append_time_ms,
        "log_start_offset": log_start,
        "record_errors": [
            {"batch_index": i, "batch_index_error_message": text} for i, text in record_errors
        ],
        "error_message": message,
    }


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Answer:
    acks = body["acks"]
    transactional_id = body.get("transactional_id")
    if transactional_id is None and _has_transactional_batch(body):
        # Kafka's rule: transactional records need a transactional id the client may
        # write (docs/contracts/transactions.md, "Produce"); nothing of it is appended.
        refused = error_response(
            body,
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "transactional records need a transactional_id in the Produce request",
        )
        return NO_RESPONSE if acks == 0 else refused
    if transactional_id is not None and not allowed(
        ctx, request, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        refused = error_response(body, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return NO_RESPONSE if acks == 0 else refused
    if transactional_id is None:
        return _produce(ctx, request, body, {})
    adding = _adds_partitions(ctx, request)
    if _verifying(ctx, acks, adding):
        found = verification.plan(_led_batches(ctx, request, body), _transaction_open(ctx))
        if isinstance(found, verification.Plan):
            return _after_verification(ctx, request, body, transactional_id, found, adding)
        if found is not None:
            return NO_RESPONSE if acks == 0 else error_response(body, found)
    return _produce(ctx, request, body, {})


def _produce(ctx: BrokerContext, request: RequestContext, body: dict, verdicts: dict) -> Answer:
    """Append every partition's batches; `verdicts`: the verified partitions' checks."""
    acks = body["acks"]
    now = ctx.now_ms()
    version = request.api_version
    every_record = ctx.config["produce.record.validation"] == "full"
    responses = []
    # acks=all, or an append whose flush.messages flush runs in the background: answer,
    # offset needed, acks, whether that flush must return first.
    waiting: dict[tuple[str, int], tuple[dict, int, int, bool]] = {}
    for topic in body["topic_data"]:
        name = topic["name"]
        if ctx.authorizer is not None and not allowed(
            ctx, request, Operation.WRITE, ResourceType.TOPIC, name
        ):
            refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            partitions = [_partition_response(p["index"], refused) for p in topic["partition_data"]]
            responses.append({"name": name, "partition_responses": partitions})
            continue
        partitions = []
        for pdata in topic["partition_data"]:
            index = pdata["index"]
            verdict = verdicts.get((name, index)) if verdicts else None
            answer, next_offset, syncing = _produce_partition(
                ctx, name, index, pdata["records"], acks, now, version, every_record, verdict
            )
            partitions.append(answer)
            if next_offset >= 0:
                if acks == -1 or (acks == 1 and syncing):
                    waiting[(name, index)] = (answer, next_offset, acks, syncing)
        responses.append({"name": name, "partition_responses": partitions})
    if acks == 0:
        return NO_RESPONSE
    response = {"responses": responses, "throttle_time_ms": 0}
    if not waiting:
        return response
    operation = DelayedProduce(ctx, response, waiting, now + body["timeout_ms"])
    if ctx.produce_purgatory.try_complete_else_watch(operation, now):
        return operation.result
    return Delayed(operation)


class DelayedProduce(DelayedOperation):
    """acks=all: the answer waits until the high watermark has passed each partition's
    appended records (every in-sync replica has them), or until `timeout_ms`; any acks
    also until the flush its append triggered returned (flush.messages)."""

    def __init__(self, ctx: BrokerContext, response: dict, waiting: dict, deadline_ms: int) -> None:
        super().__init__(deadline_ms, waiting)
        self.ctx = ctx
        self.response = response
        self.waiting = waiting  # the handler's, handed over: this operation empties it

    def try_complete(self, now_ms: int) -> bool:
        waiting = self.waiting
        for tp in list(waiting):
            answer, next_offset, acks, syncing = waiting[tp]
            if syncing:
                partition = self.ctx.replicas.get(*tp)
                if partition is not None and partition.log.flush_pending(next_offset):
                    continue
                if partition is not None and partition.log.offline:
                    _fail(answer, *partition.storage_error())
                    del waiting[tp]
                    continue
                waiting[tp] = (answer, next_offset, acks, False)
            if acks == 1:
                del waiting[tp]
                continue
            outcome = replication_outcome(self.ctx, tp, next_offset)
            if outcome is None:
                continue
            code, message = outcome
            if code != ErrorCode.NONE:
                _fail(answer, code, message)
            del waiting[tp]
        return not waiting and self.complete(self.response)

    def on_expiration(self, now_ms: int) -> dict:
        for answer, _, _, syncing in self.waiting.values():
            message = "the in-sync replicas did not confirm in time"
            if syncing:
                message = "the log flush (flush.messages) did not finish in time"
            _fail(answer, ErrorCode.REQUEST_TIMED_OUT, message)
        return self.response


def _fail(answer: dict, code: ErrorCode, message: str) -> None:
    answer.update(error_code=code, error_message=message)


def _produce_partition(
    ctx: BrokerContext,
    topic: str,
    index: int,
    records,
    acks: int,
    now: int,
    version: int,
    every_record: bool,
    verdict=None,
) -> tuple[dict, int, bool]:
    """The partition's answer; when appended, the offset after its records (else -1) and
    whether the append reached flush.messages and its fsync runs in the background
    (broker/log/README.md, "Flushes and the event loop"): answered once it returned, as
    Kafka answers after its synchronous flush."""
    if acks not in (0, 1, -1):
        return _partition_response(index, ErrorCode.INVALID_REQUIRED_ACKS), -1, False
    partition = ctx.replicas.get(topic, index)
    if partition is None:
        return _partition_response(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), -1, False
    refusal = verdict(partition) if verdict is not None else None
    if refusal is not None:
        return _partition_response(index, refusal[0], message=refusal[1]), -1, False
    records = records or b""  # null or empty: INVALID_RECORD, as Kafka
    received = len(records)
    log = partition.log
    config = log.config
    try:
        # The topic's rules (docs/contracts/log.md, "Append validation") may rebuild the
        # batch with the topic's codec: `records` is then the rebuilt batch.
        records, batches = validate_append(
            records,
            config.max_message_bytes,
            config.append_rules,
            now,
            produce_version=version,
            parse_every_record=every_record,
            partition_name=f"{topic}-{index}",
        )
    except RecordsError as exc:
        answer = _partition_response(
            index, ErrorCode(exc.error_code), message=str(exc), record_errors=exc.record_errors
        )
        return answer, -1, False
    result = partition.append_as_leader(bytearray(records), batches, now, acks)
    if result.error:
        return _partition_response(index, result.error, message=result.message), -1, False
    count = 0
    for _, header in batches:
        count += header.last_offset_delta + 1
    ctx.metrics.produced(topic, received, count)
    next_offset = result.next_offset
    if partition.high_watermark < next_offset:
        # Followers waiting at this leader fetch the new data now. (An append that moved
        # the high watermark to the log end woke them already: partition_changed.)
        ctx.partition_grew(topic, index)
    answer = _partition_response(
        index,
        ErrorCode.NONE,
        result.base_offset,
        log.log_start_offset,
        log_append_time_ms=result.log_append_time_ms,
    )
    return answer, next_offset, log.flush_pending(next_offset)


# -- KIP-890 part 1: verification before a transaction opens here ------------------------------


def _has_transactional_batch(body: dict) -> bool:
    """Any partition's first batch has the transactional attribute (what Kafka's
    ProduceRequest looks at); malformed records are left to the append's validation."""
    for topic in body["topic_data"]:
        for pdata in topic["partition_data"]:
            records = pdata["records"]
            if (
                records is not None
                and len(records) > ATTRIBUTES_POS + 1
                and records[MAGIC_POS] == 2
                and records[ATTRIBUTES_POS + 1] & TRANSACTIONAL
            ):
                return True
    return False


# The first Produce version of a transaction version 2 producer (KIP-890 part 2).
TV2_SINCE = 12


def _adds_partitions(ctx: BrokerContext, request: RequestContext) -> bool:
    """A transactional batch of this request adds its partition to the transaction."""
    return request.api_version >= TV2_SINCE and ctx.config["transaction.version"] >= 2


def _verifying(ctx: BrokerContext, acks: int, adding: bool) -> bool:
    # Adding is not optional: the producer relies on it (whatever verification's switch).
    return (
        acks in (0, 1, -1)
        and ctx.transactions is not None
        and (adding or ctx.config["transaction.partition.verification.enable"])
    )


def _led_batches(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    """The batch headers of each partition led here, of the topics the producer may
    write; what is malformed is left to the append's validation."""
    found = {}
    for topic in body["topic_data"]:
        name = topic["name"]
        if not allowed(ctx, request, Operation.WRITE, ResourceType.TOPIC, name):
            continue
        for pdata in topic["partition_data"]:
            partition = ctx.replicas.get(name, pdata["index"])
            if partition is None or not partition.is_leader:
                continue
            try:
                found[(name, pdata["index"])] = [
                    h for _, h in iter_batches(pdata["records"] or b"")
                ]
            except Exception:
                continue
    return found


def _transaction_open(ctx: BrokerContext):
    def is_open(tp, producer_id: int) -> bool:
        ongoing = ctx.replicas.get(*tp).producers.ongoing
        return producer_id in ongoing and not ctx.transactions.verifier.holds(tp, producer_id)

    return is_open


def _after_verification(
    ctx: BrokerContext,
    request: RequestContext,
    body: dict,
    transactional_id: str,
    plan: verification.Plan,
    adding: bool,
) -> Answer:
    """Ask the coordinator, then produce: partitions not verified are refused with what
    its answer means for a Produce, the verified ones appended if no marker of the
    producer reached them meanwhile (verification.guard_holds)."""
    pid = plan.producer_id
    guards = {
        tp: verification.guard_of(ctx.replicas.get(*tp).producers, pid) for tp in plan.partitions
    }
    verifier = ctx.transactions.verifier
    verifier.hold(pid, plan.holding)
    asked = verifier.verify(transactional_id, pid, plan.producer_epoch, plan.partitions, adding)
    answer = Waiter()

    def refuse(code: ErrorCode):
        refusal = verification.produce_error(code)
        return lambda partition: refusal

    def guarded(guard):
        def check(partition):
            if verification.guard_holds(partition.producers, pid, guard):
                return None
            return ErrorCode.INVALID_TXN_STATE, "the transaction ended while it was verified"

        return check

    def verified(errors) -> None:
        verifier.release(pid, plan.holding)
        try:
            if isinstance(errors, OperationFailed):
                errors = dict.fromkeys(plan.partitions, ErrorCode.NETWORK_EXCEPTION)
            verdicts = {
                tp: refuse(errors[tp]) if tp in errors else guarded(guard)
                for tp, guard in guards.items()
            }
            produced = _produce(ctx, request, body, verdicts)
        except Exception as exc:
            answer.complete(OperationFailed(exc))
            return
        if isinstance(produced, Delayed):
            produced.operation.add_done_callback(answer.complete)
        else:
            answer.complete(produced)  # NO_RESPONSE (acks=0): nobody waits for it

    asked.add_done_callback(verified)
    return NO_RESPONSE if body["acks"] == 0 else Delayed(answer)


def error_response(body: dict, code: ErrorCode, message: str | None = None) -> dict:
    return {
        "responses": [
            {
                "name": t["name"],
                "partition_responses": [
                    _partition_response(p["index"], code, message=message)
                    for p in t["partition_data"]
                ],
            }
            for t in body["topic_data"]
        ],
        "throttle_time_ms": 0,
    }


HANDLER = ApiHandler(PRODUCE_API, handle, error_response, accepted_from=3)
