"""WriteTxnMarkers through the dispatcher: the control batch it appends, and the
per-partition errors the coordinator acts on (docs/contracts/transactions.md, "Markers")."""

from __future__ import annotations

import pytest

from broker.protocol.apis import DESCRIBE_PRODUCERS, FETCH, PRODUCE, WRITE_TXN_MARKERS
from broker.protocol.errors import ErrorCode
from broker.records.batch import iter_batches, iter_records
from broker.records.control import ControlType, parse_marker
from broker.server.partition import Follower
from tests.helpers.inprocess_broker import InProcessBroker, NoResponse, Respond, Wait
from tests.helpers.server_requests import (
    RAW_TXN_SETTINGS,
    create,
    fetch,
    fetch_body,
    list_offsets,
    marker_body,
    produce,
    produce_body,
    txn_records,
    values,
    write_marker,
)

PID = 4000


@pytest.fixture
def broker(tmp_path):
    """Raw transactional produces name a transactional id no coordinator knows."""
    b = InProcessBroker(tmp_path / "logs", **RAW_TXN_SETTINGS)
    yield b
    b.close()


def test_a_marker_is_a_control_batch_that_closes_the_transaction(broker):
    create(broker, "t")
    assert produce(broker, "t", txn_records(PID, b"a", b"b"))["error_code"] == 0
    partition = broker.state.replicas.get("t", 0)
    assert partition.producers.first_unstable_offset() == 0
    assert write_marker(broker, PID, "t", commit=False, coordinator_epoch=7) == [0]
    assert partition.producers.first_unstable_offset() is None
    records = fetch(broker, "t", 0)["records"]
    (_, data), (pos, marker) = list(iter_batches(records))
    assert (marker.base_offset, marker.producer_id, marker.producer_epoch) == (2, PID, 0)
    assert marker.is_control and marker.is_transactional and marker.base_sequence == -1
    assert parse_marker(records, pos, marker) == (ControlType.ABORT, 7)
    # The producer's next transaction goes on with its sequences.
    assert produce(broker, "t", txn_records(PID, b"c", sequence=2))["error_code"] == 0


def test_marker_errors(broker):
    create(broker, "t", partitions=2)
    produce(broker, "t", txn_records(PID, b"a", epoch=3))
    # An older producer epoch than the partition has seen: a newer producer owns it.
    assert write_marker(broker, PID, "t", True, epoch=2) == [ErrorCode.INVALID_PRODUCER_EPOCH]
    assert write_marker(broker, PID, "t", True, epoch=3, coordinator_epoch=5) == [0]
    # A coordinator older than the one that wrote the last marker is fenced.
    assert write_marker(broker, PID, "t", True, epoch=3, coordinator_epoch=4) == [
        ErrorCode.TRANSACTION_COORDINATOR_FENCED
    ]
    # Partition 1 never heard of the producer: the marker is written; 9 does not exist.
    assert write_marker(broker, PID, "t", False, epoch=3, partitions=(1, 9)) == [
        0,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    assert write_marker(broker, PID, "nope", False) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


def test_acks_all_waits_for_the_in_sync_replicas(broker):
    create(broker, "t")
    produce(broker, "t", txn_records(PID, b"a"))
    partition = broker.state.replicas.get("t", 0)
    # A second in-sync replica that has not fetched: the answer waits for it.
    partition.isr = (0, 1)
    partition.followers[1] = Follower(log_end_offset=1)
    outcome = broker.send(WRITE_TXN_MARKERS, 1, marker_body(PID, "t", True))
    assert not isinstance(outcome, Respond)
    partition.record_follower_fetch(1, 2, broker.clock())  # it has the marker now
    answered = outcome.operation.result
    assert answered["markers"][0]["topics"][0]["partitions"][0]["error_code"] == 0


# -- the last stable offset and read_committed ------------------------------------------


def _committed(broker, offset: int = 0, **kw) -> dict:
    return fetch(broker, "t", offset, isolation_level=1, **kw)


def test_read_committed_stops_at_the_open_transaction_and_learns_the_aborted(broker):
    create(broker, "t")
    produce(broker, "t", values(b"plain"))  # offset 0
    produce(broker, "t", txn_records(PID, b"x", b"y"))  # 1-2, open
    produce(broker, "t", values(b"after"))  # 3
    p = _committed(broker)
    assert (p["high_watermark"], p["last_stable_offset"]) == (4, 1)
    assert [r.value for r in iter_records(p["records"])] == [b"plain"]
    assert fetch(broker, "t", 0)["last_stable_offset"] == 1  # every fetch carries it
    assert len(_committed(broker, 1)["records"]) == 0  # at the LSO: nothing yet, no error
    assert list_offsets(broker, "t", -1, isolation_level=1)["offset"] == 1
    assert list_offsets(broker, "t", -1)["offset"] == 4

    assert write_marker(broker, PID, "t", commit=False) == [0]  # ABORT at 4
    p = _committed(broker)
    assert p["last_stable_offset"] == p["high_watermark"] == 5
    assert p["aborted_transactions"] == [{"producer_id": PID, "first_offset": 1}]
    assert fetch(broker, "t", 0)["aborted_transactions"] is None  # read_uncommitted
    assert list_offsets(broker, "t", -1, isolation_level=1)["offset"] == 5
    # A range past the aborted transaction names none.
    assert _committed(broker, 5)["aborted_transactions"] is None
    produce(broker, "t", values(b"later"))
    assert _committed(broker, 5)["aborted_transactions"] == []


def test_a_waiting_read_committed_fetch_wakes_when_the_lso_moves(broker):
    create(broker, "t")
    produce(broker, "t", txn_records(PID, b"x"))
    outcome = broker.send(FETCH, 11, fetch_body("t", 0, max_wait_ms=5000, isolation_level=1))
    assert isinstance(outcome, Wait)
    assert write_marker(broker, PID, "t", commit=True) == [0]
    assert outcome.operation.completed
    (p,) = outcome.operation.result["responses"][0]["partitions"]
    assert p["last_stable_offset"] == 2 and p["aborted_transactions"] == []


def test_the_aborted_index_and_open_transactions_survive_a_crash(tmp_path):
    broker = InProcessBroker(tmp_path / "logs", **RAW_TXN_SETTINGS)
    create(broker, "t")
    produce(broker, "t", txn_records(PID, b"x"))
    write_marker(broker, PID, "t", commit=False)
    produce(broker, "t", txn_records(PID + 1, b"open"))  # 2, left open
    # A crash before the txnindex reached the disk (nothing flushed, no clean stop): the
    # rebuild replays the log above the recovery point and must not depend on it.
    (index,) = (tmp_path / "logs" / "t-0").glob("*.txnindex")
    index.unlink()
    broker.loop.close()
    broker = InProcessBroker(tmp_path / "logs", **RAW_TXN_SETTINGS)
    try:
        p = _committed(broker)
        assert p["last_stable_offset"] == 2
        assert p["aborted_transactions"] == [{"producer_id": PID, "first_offset": 0}]
        assert index.exists()
    finally:
        broker.close()


def test_describe_producers_shows_the_open_transaction(broker):
    create(broker, "t")
    produce(broker, "t", values(b"plain"))
    produce(broker, "t", txn_records(PID, b"a", epoch=2))  # 1, closed below
    write_marker(broker, PID, "t", commit=True, epoch=2, coordinator_epoch=6)
    produce(broker, "t", txn_records(PID + 1, b"b", b"c"))  # 3-4, open
    body = {"topics": [{"name": "t", "partition_indexes": [0, 5]}, {"name": "nope",
            "partition_indexes": [0]}]}  # fmt: skip
    answer = broker.call(DESCRIBE_PRODUCERS, 0, body)["topics"]
    (p0, p5), (missing,) = answer[0]["partitions"], answer[1]["partitions"]
    assert p5["error_code"] == missing["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    got = [
        (p["producer_id"], p["producer_epoch"], p["last_sequence"], p["coordinator_epoch"],
         p["current_txn_start_offset"])
        for p in p0["active_producers"]
    ]  # fmt: skip
    assert got == [(PID, 2, 0, 6, -1), (PID + 1, 0, 1, -1, 3)]


def test_transactional_records_without_a_transactional_id_are_refused(broker):
    """Kafka refuses the whole request (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
    partition, the plain one too) and appends nothing."""
    create(broker, "t", partitions=2)
    body = produce_body("t", txn_records(PID, b"x"))
    body["topic_data"][0]["partition_data"].append({"index": 1, "records": values(b"plain")})
    body["transactional_id"] = None
    answer = broker.call(PRODUCE, 8, body)
    refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert [p["error_code"] for p in answer["responses"][0]["partition_responses"]] == [refused] * 2
    assert all(broker.state.replicas.get("t", i).log.log_end_offset == 0 for i in (0, 1))
    assert isinstance(broker.send(PRODUCE, 8, {**body, "acks": 0}), NoResponse)
    assert broker.state.replicas.get("t", 0).producers.producers == {}
