"""KIP-890 part 1, the partition leader's side, as decisions without I/O: which batches of
a Produce need the coordinator's word before they are appended, how the questions are
batched per coordinator, what its answers mean for the Produce
(docs/contracts/transactions.md, "Verification at the partition leader").

A transactional producer's first batch at a partition opens its transaction there. A
late batch (a retry after its transaction was aborted, a zombie) would open a
transaction no coordinator knows of, holding the last stable offset back for ever. So
the leader asks the coordinator (AddPartitionsToTxn v4, verify_only) whether the
partition is in the producer's ongoing transaction before appending such a first batch;
batches continuing a transaction already open here are appended without asking.
verifier.py sends the questions.

With transaction version 2 (KIP-890 part 2, a Produce v12 or a TxnOffsetCommit v5 while
`transaction.version` is 2) the producer no longer adds its partitions (nor its group's
offsets partition) itself: the same question, without verify_only (AddPartitionsToTxn
v5), asks the coordinator to add them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from broker.protocol.errors import ErrorCode
from broker.records.header import NO_PRODUCER_ID, BatchHeader
from broker.transactions.state import TopicPartition

# What a verification answers per partition: the codes of those NOT verified (a partition
# absent is verified). The callback gets it once the coordinator answered, or failed to.
Errors = dict[TopicPartition, ErrorCode]
Callback = Callable[[Errors], object]


# -- which batches need verifying -------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """The partitions of a Produce to verify before anything of it is appended."""

    producer_id: int
    producer_epoch: int
    partitions: frozenset[TopicPartition]
    # Every partition of the request with the producer's transactional batches: all wait
    # for the answer, and are held meanwhile (see `plan`).
    holding: frozenset[TopicPartition] = frozenset()


def plan(
    batches: Mapping[TopicPartition, Iterable[BatchHeader]],
    transaction_open: Callable[[TopicPartition, int], bool],
) -> Plan | ErrorCode | None:
    """`batches`: the headers of each partition led here (of authorized topics);
    `transaction_open(tp, producer_id)`: the producer has a transaction open at tp and
    no batch of its to tp is held by an earlier Produce waiting for verification (a later
    batch must not overtake it: connections read ahead past a waiting Produce, so it
    waits too, and the answers come in order).

    None: nothing to verify. INVALID_PRODUCER_ID_MAPPING: the transactional batches
    carry more than one producer id (one transactional id has one producer; Kafka
    refuses the whole request). Else the Plan: the partitions whose transactional
    batches would open a transaction, with the first such batch's producer id and epoch.
    """
    producer_ids: set[int] = set()
    first: BatchHeader | None = None
    to_verify: set[TopicPartition] = set()
    holding: set[TopicPartition] = set()
    for tp, headers in batches.items():
        transactional = [
            h for h in headers if h.is_transactional and h.producer_id != NO_PRODUCER_ID
        ]
        if not transactional:
            continue
        producer_ids.update(h.producer_id for h in transactional)
        holding.add(tp)
        if not transaction_open(tp, transactional[0].producer_id):
            to_verify.add(tp)
            first = first or transactional[0]
    if len(producer_ids) > 1:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if not to_verify:
        return None
    return Plan(first.producer_id, first.producer_epoch, frozenset(to_verify), frozenset(holding))


# -- the guard: nothing closed the transaction while the coordinator was asked --------------


def guard_of(producers, producer_id: int) -> tuple[int, int] | None:
    """What a verification starts from at a partition (`producers`: its
    ProducerStateTable): the producer's epoch and last marker offset there."""
    entry = producers.producers.get(producer_id)
    return None if entry is None else (entry.epoch, entry.last_marker_offset)


def guard_holds(producers, producer_id: int, guard: tuple[int, int] | None) -> bool:
    """The verified batch may still open a transaction: one is open already (an earlier
    batch of the same transaction got there first), or no marker and no new epoch of this
    producer reached the partition since the verification started. A marker meanwhile
    means the transaction the coordinator confirmed may have ended: appending would open
    one it no longer knows (as Kafka's VerificationGuard)."""
    return producer_id in producers.ongoing or guard_of(producers, producer_id) == guard


# -- what the coordinator's answer means for the Produce --------------------------------------

# Retriable coordinator states that clients older than KIP-890 do not retry on a Produce:
# answered NOT_ENOUGH_REPLICAS, which every producer retries without refreshing metadata
# (Kafka's mapping; CONCURRENT_TRANSACTIONS is among them before transaction version 2).
_RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset(
    {
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    }
)


def produce_error(code: ErrorCode) -> tuple[ErrorCode, str]:
    """The Produce answer of a partition whose verification failed with `code`."""
    if code == ErrorCode.INVALID_TXN_STATE:
        return code, "the partition is not in the producer's ongoing transaction"
    if code in _RETRY_AS_NOT_ENOUGH_REPLICAS:
        return (
            ErrorCode.NOT_ENOUGH_REPLICAS,
            f"could not verify that the partition is in the transaction: {code.name}",
        )
    return code, f"transaction verification failed: {code.name}"


# What a TxnOffsetCommit answers when the add of the group's offsets partition failed
# (transaction version 2, docs/contracts/transactions.md): Kafka's offset commit mapping,
# so that every client retries what it can (a lost answer as a coordinator still loading:
# retried without a new coordinator lookup).
_OFFSET_COMMIT_CODE = {
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}
# TxnOffsetCommit versions below this one do not know TRANSACTION_ABORTABLE (KIP-890).
OFFSET_COMMIT_ABORTABLE_SINCE = 4


def offset_commit_error(code: ErrorCode, version: int) -> ErrorCode:
    """A TxnOffsetCommit's code for every partition when the coordinator did not add the
    group's offsets partition (`code`: as `coordinator_code` gave it)."""
    if code == ErrorCode.TRANSACTION_ABORTABLE and version < OFFSET_COMMIT_ABORTABLE_SINCE:
        return ErrorCode.INVALID_TXN_STATE
    return _OFFSET_COMMIT_CODE.get(code, code)


def coordinator_code(code: int) -> ErrorCode:
    """A partition's code in the coordinator's answer, as the leader takes it: producers
    expect INVALID_PRODUCER_EPOCH on a Produce, not PRODUCER_FENCED (as Kafka)."""
    code = ErrorCode(code)
    return ErrorCode.INVALID_PRODUCER_EPOCH if code == ErrorCode.PRODUCER_FENCED else code


def request_code(code: int) -> ErrorCode:
    """A whole-request error of the coordinator's answer, for every partition: a leader
    not allowed CLUSTER_ACTION there could not verify, which the producer must not take
    for its own authorization failure (INVALID_TXN_STATE, as Kafka)."""
    code = ErrorCode(code)
    return ErrorCode.INVALID_TXN_STATE if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED else code


# -- batching per coordinator --------------------------------------------------------------------


@dataclass
class _Txn:
    producer_id: int
    producer_epoch: int
    partitions: set[TopicPartition] = field(default_factory=set)
    # False once a transaction version 2 Produce asks: the coordinator adds the
    # partitions. One producer at one epoch asks one way; should both come, adding
    # covers the verifying Produce too (the same producer's batches, the same answer).
    verify_only: bool = True
    # Each waiting Produce: its partitions and its callback, in arrival order, so the
    # batches of one producer are appended in the order they came.
    waiting: list[tuple[frozenset[TopicPartition], Callback]] = field(default_factory=list)


Calls = list[tuple[Callback, Errors]]
Sent = dict[str, _Txn]


class VerificationQueue:
    """Questions per coordinator broker: at most one AddPartitionsToTxn request in flight
    to each; what comes meanwhile waits and goes together in the next one (as Kafka's
    AddPartitionsToTxnManager). Returns the callbacks to call instead of calling them."""

    def __init__(self) -> None:
        self.pending: dict[int, dict[str, _Txn]] = {}
        self.in_flight: set[int] = set()

    def add(
        self,
        broker: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
        callback: Callback,
        add: bool = False,
    ) -> Calls:
        """Queue a question; returns the callbacks failed by it. A request carries one
        entry per transactional id: the same producer and epoch join the entry; a newer
        epoch fences the queued ones (INVALID_PRODUCER_EPOCH), an older one is fenced at
        once; another producer id at the same epoch replaces the queued ones, answered
        NETWORK_EXCEPTION so that their producer retries (Kafka's rules)."""
        queued = self.pending.setdefault(broker, {})
        txn = queued.get(transactional_id)
        failed: Calls = []
        if txn is not None and (txn.producer_id, txn.producer_epoch) != (
            producer_id,
            producer_epoch,
        ):
            if producer_epoch < txn.producer_epoch:
                return [(callback, dict.fromkeys(partitions, ErrorCode.INVALID_PRODUCER_EPOCH))]
            code = (
                ErrorCode.INVALID_PRODUCER_EPOCH
                if txn.producer_epoch < producer_epoch
                else ErrorCode.NETWORK_EXCEPTION
            )
            failed = [(cb, dict.fromkeys(tps, code)) for tps, cb in txn.waiting]
            txn = None
        if txn is None:
            txn = queued[transactional_id] = _Txn(producer_id, producer_epoch)
        txn.partitions |= partitions
        txn.verify_only = txn.verify_only and not add
        txn.waiting.append((partitions, callback))
        return failed

    def take(self) -> list[tuple[int, dict, Sent]]:
        """The requests to send now: (broker, AddPartitionsToTxn body, what it asks)
        for each broker with questions and none in flight."""
        ready = []
        for broker in [b for b in self.pending if b not in self.in_flight]:
            sent = self.pending.pop(broker)
            if not sent:
                continue
            self.in_flight.add(broker)
            ready.append((broker, request_body(sent), sent))
        return ready

    def answered(self, broker: int, sent: Sent, response: dict | _Skip | None) -> Calls:
        """The callbacks of a request's questions with their errors; `response` None: no
        answer came (NETWORK_EXCEPTION, retriable); SKIP: the coordinator cannot verify
        (a broker without AddPartitionsToTxn v4): verified, as Kafka."""
        self.in_flight.discard(broker)
        if response is SKIP:
            return [(cb, {}) for txn in sent.values() for _, cb in txn.waiting]
        errors = _answer_errors(sent, response)
        return [
            (cb, {tp: code for tp, code in errors[txn_id].items() if tp in tps})
            for txn_id, txn in sent.items()
            for tps, cb in txn.waiting
        ]


class _Skip:
    def __repr__(self) -> str:
        return "SKIP"


SKIP = _Skip()  # the answer of a coordinator that cannot verify


VERIFY_VERSION = 4  # the first AddPartitionsToTxn version with verify_only
ADD_VERSION = 5  # a broker's request adding for a transaction version 2 Produce


def request_version(body: dict) -> int:
    """The AddPartitionsToTxn version a request body goes at."""
    adds = any(not txn["verify_only"] for txn in body["transactions"])
    return ADD_VERSION if adds else VERIFY_VERSION


def request_body(sent: Sent) -> dict:
    return {
        "transactions": [
            {
                "transactional_id": txn_id,
                "producer_id": txn.producer_id,
                "producer_epoch": txn.producer_epoch,
                "verify_only": txn.verify_only,
                "topics": [
                    {
                        "name": topic,
                        "partitions": sorted(p for t, p in txn.partitions if t == topic),
                    }
                    for topic in sorted({t for t, _ in txn.partitions})
                ],
            }
            for txn_id, txn in sent.items()
        ]
    }


def _answer_errors(sent: Sent, response: dict | None) -> dict[str, Errors]:
    """Per transactional id, the partitions not verified and why."""
    if response is None or response.get("error_code", 0) != 0:
        code = (
            ErrorCode.NETWORK_EXCEPTION
            if response is None
            else request_code(response["error_code"])
        )
        return {txn_id: dict.fromkeys(txn.partitions, code) for txn_id, txn in sent.items()}
    found: dict[str, Errors] = {}
    for result in response["results_by_transaction"]:
        found[result["transactional_id"]] = {
            (topic["name"], p["partition_index"]): coordinator_code(p["partition_error_code"])
            for topic in result["topic_results"]
            for p in topic["results_by_partition"]
            if p["partition_error_code"] != 0
        }
    # A transaction the answer left out is not verified: asked again on the retry.
    return {
        txn_id: found[txn_id]
        if txn_id in found
        else dict.fromkeys(txn.partitions, ErrorCode.NETWORK_EXCEPTION)
        for txn_id, txn in sent.items()
    }
