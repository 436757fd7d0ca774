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


def test_a_follower_keeps_the_same_transactions_and_aborted_index(tmp_path):
    """A leader appends a transaction and its ABORT; a follower copies the bytes: it has
    the same open transactions, LSO inputs and .txnindex, and keeps them when truncated."""
    from broker.log.config import LogConfig
    from broker.log.log import Log
    from broker.log.txn_index import AbortedTxn
    from broker.records.batch import build_batch
    from broker.records.control import build_marker
    from broker.records.header import parse_header
    from broker.server.partition import Leadership, Partition

    leader = Partition(Log.open(tmp_path / "a" / "t-0", "t", 0, LogConfig()), broker_id=0)
    leader.make_leader(Leadership(0, 1, (0,), (0, 1)), now_ms=0)
    follower = Partition(Log.open(tmp_path / "b" / "t-0", "t", 0, LogConfig()), broker_id=1)
    follower.make_follower(Leadership(0, 1, (0,), (0, 1)))

    def txn(pid: int) -> bytes:
        return build_batch([(None, b"x", 1, [])], producer_id=pid, producer_epoch=0,
                           base_sequence=0, transactional=True)  # fmt: skip

    # 0: producer 5's transaction, 1: its ABORT, 2: producer 6's, left open.
    for data in (txn(5), build_marker(5, 0, False, 2, 1), txn(6)):
        buf = bytearray(data)
        assert leader.append_as_leader(buf, [(0, parse_header(buf))], now_ms=0).error == 0
    copied = b"".join(r.read() for r in leader.log.read(0, 1 << 20).regions)
    follower.append_as_follower(copied, now_ms=0)
    expected = [AbortedTxn(5, 0, 1, 2)]
    for replica in (leader, follower):
        assert replica.log.aborted_transactions(0, 10) == expected
        assert replica.producers.first_unstable_offset() == 2
    follower.truncate_to(1)  # the marker goes: its entry too, the transaction is open again
    assert follower.log.aborted_transactions(0, 10) == []
    assert follower.producers.first_unstable_offset() == 0
    leader.log.close()
    follower.log.close()


def test_the_cleaner_keeps_a_fenced_producers_last_marker():
    """A producer whose last entry is a marker of a new epoch (the coordinator fenced it)
    has no data batch to keep: the marker is what holds its epoch (Kafka keeps it too)."""
    table = ProducerStateTable()
    table.record(_header(1, 0), 0, 0)
    table.record(_header(1, 1, epoch=1, control=True), 1, 0, ABORT)
    table.record(_header(2, 2), 2, 0)
    assert table.last_offsets() == {1: 1, 2: 2}
