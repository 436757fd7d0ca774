"""WriteTxnMarkers through the dispatcher: the control batch it appends, and the
per-partition errors the coordinator acts on (docs/contracts/transactions.md, "Markers")."""

from __future__ import annotations

from broker.protocol.apis import WRITE_TXN_MARKERS
from broker.protocol.errors import ErrorCode
from broker.records.batch import iter_batches
from broker.records.control import ControlType, parse_marker
from broker.server.partition import Follower
from tests.helpers.inprocess_broker import Respond
from tests.helpers.server_requests import (
    create,
    fetch,
    marker_body,
    produce,
    txn_records,
    write_marker,
)

PID = 4000


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
