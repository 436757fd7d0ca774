"""KIP-890 part 1 wired into Produce, in process: the leader asks the coordinator (this
same broker, reached through a loopback transport that counts the requests) before a
transactional batch opens a transaction at a partition; batches continuing one go
without asking; questions are batched per coordinator. The decisions themselves are
tested in test_verification.py."""

from __future__ import annotations

import asyncio

import pytest

from broker.protocol.apis import ADD_PARTITIONS_TO_TXN, PRODUCE, WRITE_TXN_MARKERS
from broker.protocol.errors import ErrorCode as E
from tests.helpers import transactions as tx
from tests.helpers.inprocess_broker import InProcessBroker, NoResponse, Respond, Wait
from tests.helpers.server_requests import create, txn_records, write_marker

SETTINGS = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "2"}


class Loopback:
    """Stands in for the network between brokers: every request goes to the broker
    itself, recorded; `down` makes it fail as a lost connection."""

    def __init__(self, broker: InProcessBroker, api: int, version: int) -> None:
        self.broker, self.api, self.version = broker, api, version
        self.requests: list[dict] = []
        self.down = False

    async def __call__(self, node: int, body: dict) -> dict:
        self.requests.append(body)
        if self.down:
            raise ConnectionError("coordinator unreachable")
        outcome = self.broker.send(self.api, self.version, body)
        while isinstance(outcome, Wait):
            await asyncio.sleep(0.001)
            outcome = self.broker.answer_of(outcome) or outcome
        return self.broker.decode(self.api, self.version, outcome)


def _open(path, ready: bool = True, **overrides) -> InProcessBroker:
    b = InProcessBroker(path, **SETTINGS, **overrides)
    b.coordinator = Loopback(b, ADD_PARTITIONS_TO_TXN, 4)
    b.state.transactions.verifier.transport = b.coordinator
    b.state.transactions.markers.transport = Loopback(b, WRITE_TXN_MARKERS, 1)
    create(b, "t", partitions=2)
    if ready:
        tx.ready(b)
    return b


def _close(b: InProcessBroker) -> None:
    b.state.transactions.markers.close()
    tx.run_loop(b, 1)
    b.close()


@pytest.fixture
def broker(tmp_path):
    b = _open(tmp_path / "logs")
    yield b
    _close(b)


def _send(b, txn_id: str, records: dict, acks: int = -1):
    """Produce `records` (partition of "t" -> batch) as `txn_id`'s producer."""
    body = {
        "transactional_id": txn_id, "acks": acks, "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [
            {"index": p, "records": r} for p, r in records.items()
        ]}],
    }  # fmt: skip
    return b.send(PRODUCE, 8, body)


def _answer(b, outcome) -> dict:
    """partition -> (error code, base offset)."""
    if isinstance(outcome, Wait):
        outcome = b.run_until_answered(outcome)
    assert isinstance(outcome, Respond), outcome
    (topic,) = b.decode(PRODUCE, 8, outcome)["responses"]
    return {p["index"]: (p["error_code"], p["base_offset"]) for p in topic["partition_responses"]}


def _end(b, partition: int = 0) -> int:
    return b.state.replicas.get("t", partition).log.log_end_offset


def test_a_partition_not_added_is_refused_an_added_one_appended(broker):
    b = broker
    pid = tx.init(b, "tx")["producer_id"]
    assert _answer(b, _send(b, "tx", {0: txn_records(pid, b"x")})) == {0: (E.INVALID_TXN_STATE, -1)}
    assert _end(b) == 0 and len(b.coordinator.requests) == 1
    assert tx.add_partitions(b, "tx", pid, 0, {"t": [0, 1]}) == {("t", 0): 0, ("t", 1): 0}
    both = {0: txn_records(pid, b"a"), 1: txn_records(pid, b"b")}
    assert _answer(b, _send(b, "tx", both)) == {0: (0, 0), 1: (0, 0)}
    # One question for both partitions.
    assert len(b.coordinator.requests) == 2
    (asked,) = b.coordinator.requests[1]["transactions"]
    assert asked["verify_only"] and asked["topics"] == [{"name": "t", "partitions": [0, 1]}]
    # Continuing the transaction: no question, answered at once.
    more = {0: txn_records(pid, b"c", sequence=1), 1: txn_records(pid, b"d", sequence=1)}
    outcome = _send(b, "tx", more)
    assert isinstance(outcome, Respond) and _answer(b, outcome) == {0: (0, 1), 1: (0, 1)}
    assert len(b.coordinator.requests) == 2
    # Committed: a late batch of the producer may not open a transaction nobody ends.
    assert tx.end(b, "tx", pid, 0, commit=True) == 0
    tx.run_loop(b)
    end = _end(b)
    late = _send(b, "tx", {0: txn_records(pid, b"late", sequence=2)})
    assert _answer(b, late) == {0: (E.INVALID_TXN_STATE, -1)}
    assert _end(b) == end and len(b.coordinator.requests) == 3


def test_questions_are_batched_per_coordinator(broker):
    b = broker
    pids = {}
    for txn_id in ("a", "b", "c"):
        pids[txn_id] = tx.init(b, txn_id)["producer_id"]
        tx.add_partitions(b, txn_id, pids[txn_id], 0, {"t": [0]})
    # Sent before the loop runs: "a"'s question is in flight, "b" and "c" wait for it.
    waiting = [_send(b, t, {0: txn_records(pid, t.encode())}) for t, pid in pids.items()]
    assert all(isinstance(w, Wait) for w in waiting)
    assert [_answer(b, w)[0][0] for w in waiting] == [0, 0, 0]
    assert [[t["transactional_id"] for t in r["transactions"]] for r in b.coordinator.requests] == [
        ["a"],
        ["b", "c"],
    ]
    assert _end(b) == 3


def test_a_continuing_batch_does_not_overtake_one_waiting_for_verification(broker):
    b = broker
    pid = tx.init(b, "tx")["producer_id"]
    tx.add_partitions(b, "tx", pid, 0, {"t": [0, 1]})
    assert _answer(b, _send(b, "tx", {0: txn_records(pid, b"a")})) == {0: (0, 0)}
    # t-0 continues, t-1 opens: the request waits for the answer about t-1 ...
    first = _send(b, "tx", {0: txn_records(pid, b"b", sequence=1), 1: txn_records(pid, b"c")})
    # ... and the next batch to t-0, read ahead on the same connection, waits behind it.
    second = _send(b, "tx", {0: txn_records(pid, b"d", sequence=2)})
    assert isinstance(first, Wait) and isinstance(second, Wait)
    assert _answer(b, first) == {0: (0, 1), 1: (0, 0)}
    assert _answer(b, second) == {0: (0, 2)}
    assert b.state.transactions.verifier.held == {}


def test_what_the_producer_is_told_when_verification_fails(broker):
    b = broker
    pid = tx.init(b, "tx")["producer_id"]
    tx.add_partitions(b, "tx", pid, 0, {"t": [0]})
    # Another epoch (the coordinator says PRODUCER_FENCED): the producer's error.
    fenced = _send(b, "tx", {0: txn_records(pid, b"x", epoch=1)})
    assert _answer(b, fenced) == {0: (E.INVALID_PRODUCER_EPOCH, -1)}
    unknown = _send(b, "nobody", {0: txn_records(pid, b"x")})
    assert _answer(b, unknown) == {0: (E.INVALID_PRODUCER_ID_MAPPING, -1)}
    # Two producers' transactional batches in one request: refused without asking.
    asked = len(b.coordinator.requests)
    two = _send(b, "tx", {0: txn_records(pid, b"x"), 1: txn_records(pid + 1, b"y")})
    assert _answer(b, two)[0][0] == E.INVALID_PRODUCER_ID_MAPPING
    assert len(b.coordinator.requests) == asked
    # The coordinator unreachable: retriable for every client (NOT_ENOUGH_REPLICAS).
    b.coordinator.down = True
    lost = _send(b, "tx", {0: txn_records(pid, b"x")})
    assert _answer(b, lost) == {0: (E.NOT_ENOUGH_REPLICAS, -1)}
    # acks=0: no answer, nothing appended either.
    assert isinstance(_send(b, "tx", {0: txn_records(pid, b"x")}, acks=0), NoResponse)
    tx.run_loop(b)
    assert _end(b) == 0
    b.coordinator.down = False
    assert _answer(b, _send(b, "tx", {0: txn_records(pid, b"x")})) == {0: (0, 0)}


def test_a_marker_while_verifying_refuses_the_batch(broker):
    b = broker
    pid = tx.init(b, "tx")["producer_id"]
    tx.add_partitions(b, "tx", pid, 0, {"t": [0]})
    waiting = _send(b, "tx", {0: txn_records(pid, b"x")})
    assert isinstance(waiting, Wait)
    # The transaction ended (the coordinator's abort) before the answer came back.
    assert write_marker(b, pid, "t", commit=False) == [0]
    assert _answer(b, waiting) == {0: (E.INVALID_TXN_STATE, -1)}
    assert _end(b) == 1  # the marker alone


def test_verification_can_be_turned_off(tmp_path):
    b = _open(tmp_path / "logs", **{"transaction.partition.verification.enable": "false"})
    try:
        pid = tx.init(b, "tx")["producer_id"]
        outcome = _send(b, "tx", {0: txn_records(pid, b"x")})
        assert _answer(b, outcome) == {0: (0, 0)} and b.coordinator.requests == []
    finally:
        _close(b)


def test_no_coordinator_known_is_retriable(tmp_path):
    # No __transaction_state yet: no leader to ask; answered without a request.
    b = _open(tmp_path / "logs", ready=False)
    try:
        outcome = _send(b, "tx", {0: txn_records(5, b"x")})
        assert _answer(b, outcome) == {0: (E.NOT_ENOUGH_REPLICAS, -1)}
        assert b.coordinator.requests == [] and _end(b) == 0
    finally:
        _close(b)
