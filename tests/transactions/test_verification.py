"""KIP-890 part 1's decisions at the partition leader, without sockets: which batches need
the coordinator's word, what its answers mean for a Produce, the batching of questions
per coordinator broker, and the guard against a marker landing meanwhile."""

from __future__ import annotations

import pytest

from broker.protocol.errors import ErrorCode as E
from broker.records.batch import build_batch
from broker.records.control import ControlType, Marker, build_marker
from broker.records.header import parse_header
from broker.server.producer_state import ProducerStateTable
from broker.transactions import verification as v
from tests.helpers.server_requests import txn_records, values

A, B = ("t", 0), ("t", 1)


def header(records: bytes):
    return parse_header(bytearray(records))


def test_only_batches_opening_a_transaction_are_verified():
    txn = header(txn_records(7, b"x", epoch=3))
    plain = header(values(b"p"))
    idempotent = header(build_batch([(None, b"i", 1, [])], producer_id=8, base_sequence=0))
    nothing_open = lambda tp, pid: False  # noqa: E731
    assert v.plan({A: [plain], B: [idempotent]}, nothing_open) is None
    assert v.plan({A: [txn], B: [plain]}, nothing_open) == v.Plan(
        7, 3, frozenset({A}), frozenset({A})
    )
    # A transaction already open at A: continuing batches go without asking.
    open_at_a = lambda tp, pid: tp == A and pid == 7  # noqa: E731
    assert v.plan({A: [txn]}, open_at_a) is None
    # Both wait for the answer about B (the batch to A must not be overtaken meanwhile).
    assert v.plan({A: [txn], B: [txn]}, open_at_a) == v.Plan(
        7, 3, frozenset({B}), frozenset({A, B})
    )
    # One transactional id has one producer: two producer ids refuse the request.
    other = header(txn_records(9, b"y"))
    assert v.plan({A: [txn], B: [other]}, open_at_a) == E.INVALID_PRODUCER_ID_MAPPING


@pytest.mark.parametrize(
    "code, produce_code",
    [
        (E.INVALID_TXN_STATE, E.INVALID_TXN_STATE),
        (E.NETWORK_EXCEPTION, E.NOT_ENOUGH_REPLICAS),
        (E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_ENOUGH_REPLICAS),
        (E.COORDINATOR_NOT_AVAILABLE, E.NOT_ENOUGH_REPLICAS),
        (E.NOT_COORDINATOR, E.NOT_ENOUGH_REPLICAS),
        (E.CONCURRENT_TRANSACTIONS, E.NOT_ENOUGH_REPLICAS),
        (E.INVALID_PRODUCER_ID_MAPPING, E.INVALID_PRODUCER_ID_MAPPING),
        (E.INVALID_PRODUCER_EPOCH, E.INVALID_PRODUCER_EPOCH),
    ],
)
def test_what_a_failed_verification_answers_the_producer(code, produce_code):
    answered, message = v.produce_error(code)
    assert answered == produce_code and message
    if produce_code == E.NOT_ENOUGH_REPLICAS:
        assert code.name in message  # the underlying reason stays visible


def test_coordinator_codes_as_the_leader_takes_them():
    assert v.coordinator_code(E.PRODUCER_FENCED) == E.INVALID_PRODUCER_EPOCH
    assert v.coordinator_code(E.INVALID_TXN_STATE) == E.INVALID_TXN_STATE
    assert v.request_code(E.CLUSTER_AUTHORIZATION_FAILED) == E.INVALID_TXN_STATE
    assert v.request_code(E.COORDINATOR_NOT_AVAILABLE) == E.COORDINATOR_NOT_AVAILABLE


def _answer(body: dict, codes: dict) -> dict:
    """The coordinator's answer to `body`: `codes[(txn_id, tp)]`, else NONE."""
    return {
        "error_code": 0,
        "results_by_transaction": [
            {
                "transactional_id": t["transactional_id"],
                "topic_results": [
                    {
                        "name": x["name"],
                        "results_by_partition": [
                            {
                                "partition_index": p,
                                "partition_error_code": codes.get(
                                    (t["transactional_id"], (x["name"], p)), 0
                                ),
                            }
                            for p in x["partitions"]
                        ],
                    }
                    for x in t["topics"]
                ],
            }
            for t in body["transactions"]
        ],
    }


def test_one_request_in_flight_per_coordinator_the_rest_batched():
    q = v.VerificationQueue()
    got: dict[str, list] = {}

    def cb(name):
        return lambda errors: got.setdefault(name, []).append(errors)

    assert q.add(1, "a", 10, 0, frozenset({A}), cb("a1")) == []
    assert q.add(2, "b", 11, 0, frozenset({A}), cb("b")) == []
    first = q.take()
    assert sorted(broker for broker, _, _ in first) == [1, 2]
    (body,) = [body for broker, body, _ in first if broker == 1]
    assert body["transactions"] == [
        {
            "transactional_id": "a",
            "producer_id": 10,
            "producer_epoch": 0,
            "verify_only": True,
            "topics": [{"name": "t", "partitions": [0]}],
        }
    ]
    # Broker 1 is answering: what comes for it waits, and goes together.
    q.add(1, "a", 10, 0, frozenset({B}), cb("a2"))
    q.add(1, "c", 12, 0, frozenset({A, B}), cb("c"))
    assert q.take() == []
    sent1 = [sent for broker, _, sent in first if broker == 1][0]
    calls = q.answered(1, sent1, _answer(body, {}))
    for callback, errors in calls:
        callback(errors)
    assert got["a1"] == [{}]
    ((broker, body2, sent2),) = q.take()
    assert broker == 1 and [t["transactional_id"] for t in body2["transactions"]] == ["a", "c"]
    refused = {("c", B): E.INVALID_TXN_STATE, ("a", B): E.PRODUCER_FENCED}
    for callback, errors in q.answered(1, sent2, _answer(body2, refused)):
        callback(errors)
    assert got["a2"] == [{B: E.INVALID_PRODUCER_EPOCH}]
    assert got["c"] == [{B: E.INVALID_TXN_STATE}]
    assert q.take() == [] and q.in_flight == {2}


def test_queued_questions_of_one_transactional_id():
    q = v.VerificationQueue()
    # The same producer and epoch: one entry, each produce answered for its partitions.
    assert q.add(1, "a", 10, 1, frozenset({A}), "first") == []
    assert q.add(1, "a", 10, 1, frozenset({B}), "second") == []
    # A newer epoch fences what was queued; an older one is fenced at once.
    assert q.add(1, "a", 10, 2, frozenset({A}), "newer") == [
        ("first", {A: E.INVALID_PRODUCER_EPOCH}),
        ("second", {B: E.INVALID_PRODUCER_EPOCH}),
    ]
    assert q.add(1, "a", 10, 1, frozenset({A}), "older") == [
        ("older", {A: E.INVALID_PRODUCER_EPOCH})
    ]
    # Another producer id at the same epoch: the queued one retries.
    assert q.add(1, "a", 11, 2, frozenset({B}), "other") == [("newer", {A: E.NETWORK_EXCEPTION})]
    ((_, body, _),) = q.take()
    assert [(t["producer_id"], t["producer_epoch"]) for t in body["transactions"]] == [(11, 2)]


def test_answers_that_verify_nothing():
    q = v.VerificationQueue()
    q.add(1, "a", 10, 0, frozenset({A, B}), "a")
    q.add(1, "b", 11, 0, frozenset({A}), "b")
    ((_, body, sent),) = q.take()
    # No answer (connection lost, timeout): retriable for every partition.
    assert q.answered(1, sent, None) == [
        ("a", {A: E.NETWORK_EXCEPTION, B: E.NETWORK_EXCEPTION}),
        ("b", {A: E.NETWORK_EXCEPTION}),
    ]
    # The whole request refused.
    refused = {"error_code": E.CLUSTER_AUTHORIZATION_FAILED, "results_by_transaction": []}
    assert q.answered(1, sent, refused)[1] == ("b", {A: E.INVALID_TXN_STATE})
    # A transaction left out of the answer is not verified.
    partial = _answer(body, {})
    partial["results_by_transaction"] = partial["results_by_transaction"][:1]
    assert q.answered(1, sent, partial) == [("a", {}), ("b", {A: E.NETWORK_EXCEPTION})]
    # A coordinator without v4 cannot verify: appended unverified (as Kafka).
    assert q.answered(1, sent, v.SKIP) == [("a", {}), ("b", {})]


def test_a_marker_landing_during_verification_breaks_the_guard():
    table = ProducerStateTable()
    assert v.guard_of(table, 7) is None
    guard = v.guard_of(table, 7)
    assert v.guard_holds(table, 7, guard)
    # The coordinator aborted meanwhile: its marker reached the partition first.
    marker = build_marker(7, 0, commit=False, coordinator_epoch=0, timestamp_ms=1_000)
    table.record(header(marker), 0, 1_000, Marker(ControlType.ABORT, 0))
    assert not v.guard_holds(table, 7, guard)
    # A transaction opened meanwhile by another batch of the same producer: fine.
    guard = v.guard_of(table, 7)
    table.record(header(txn_records(7, b"x")), 1, 1_000)
    assert v.guard_holds(table, 7, (0, -5))
    assert v.guard_holds(table, 7, guard)
