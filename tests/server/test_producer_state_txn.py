"""Producer state's part in transactions, without a log: which transactions are open,
what a marker closes, and the checks a marker must pass."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.records.control import ControlType, Marker
from broker.records.header import CONTROL, TRANSACTIONAL, BatchHeader
from broker.server.producer_state import CompletedTxn, ProducerStateTable


def _header(pid, offset, count=1, epoch=0, seq=0, control=False, txn=True) -> BatchHeader:
    attributes = (TRANSACTIONAL if txn else 0) | (CONTROL if control else 0)
    seq = -1 if control else seq
    return BatchHeader(offset, 0, 0, 2, 0, attributes, count - 1, 0, 0, pid, epoch, seq, count)


ABORT, COMMIT = Marker(ControlType.ABORT, 3), Marker(ControlType.COMMIT, 3)


def test_the_first_transactional_batch_opens_and_a_marker_closes():
    table = ProducerStateTable()
    table.record(_header(1, 10, count=2), 10, 0)
    table.record(_header(2, 12), 12, 0)
    table.record(_header(1, 13, seq=2), 13, 0)  # same transaction: still opened at 10
    assert table.first_unstable_offset() == 10
    done = table.record(_header(1, 14, control=True), 14, 0, ABORT)
    # The LSO once it closed: the other open transaction's start.
    assert done == CompletedTxn(1, 10, 14, True, 12)
    assert table.record(_header(2, 15, control=True), 15, 0, COMMIT) == (2, 12, 15, False, 16)
    assert table.first_unstable_offset() is None
    # A marker for a producer with nothing open here closes nothing.
    assert table.record(_header(2, 16, control=True), 16, 0, COMMIT) is None


def test_marker_checks():
    table = ProducerStateTable()
    table.record(_header(1, 0, epoch=4), 0, 0)
    table.record(_header(1, 1, epoch=4, control=True), 1, 0, Marker(ControlType.COMMIT, 9))
    old_epoch = table.check(_header(1, 2, epoch=3, control=True), COMMIT)
    assert old_epoch.error == ErrorCode.INVALID_PRODUCER_EPOCH
    fenced = table.check(_header(1, 2, epoch=4, control=True), Marker(ControlType.ABORT, 8))
    assert fenced.error == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    # A bumped epoch (the coordinator fencing a producer) is accepted.
    assert (
        table.check(_header(1, 2, epoch=5, control=True), Marker(ControlType.ABORT, 9)).error == 0
    )


def test_an_open_transaction_keeps_its_producer_from_expiring():
    table = ProducerStateTable()
    table.record(_header(1, 0), 0, 0)
    table.record(_header(2, 1, txn=False), 1, 0)
    table.expire(now_ms=10_000, expiration_ms=1)
    assert set(table.producers) == {1}
