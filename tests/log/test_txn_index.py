"""The aborted-transaction index of a segment: Kafka's entry layout, the search a
read_committed fetch makes, truncation, and a torn tail."""

from __future__ import annotations

import struct

from broker.log.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex


def test_entries_are_kafkas_layout_and_come_back(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path)
    assert index.append(AbortedTxn(7, 10, 20, 21))
    assert not index.append(AbortedTxn(7, 10, 20, 21))  # a rebuild re-adding it
    assert path.read_bytes() == struct.pack(">hqqqq", 0, 7, 10, 20, 21)
    assert TransactionIndex(path).entries == [AbortedTxn(7, 10, 20, 21)]


def test_collect_takes_the_overlapping_and_stops_at_the_bound(tmp_path):
    index = TransactionIndex(tmp_path / "x.txnindex")
    for entry in [(1, 0, 5, 6), (2, 8, 12, 13), (3, 14, 30, 31), (4, 32, 40, 41)]:
        index.append(AbortedTxn(*entry))
    found, complete = index.collect(6, 20)
    assert [e.producer_id for e in found] == [2, 3] and complete
    found, complete = index.collect(0, 100)
    assert len(found) == 4 and not complete  # later segments may hold more


def test_truncation_and_a_torn_tail(tmp_path):
    path = tmp_path / "x.txnindex"
    index = TransactionIndex(path)
    index.append(AbortedTxn(1, 0, 5, 6))
    index.append(AbortedTxn(2, 3, 9, 10))
    index.truncate_to(9)  # the marker at 9 is gone
    assert TransactionIndex(path).entries == [AbortedTxn(1, 0, 5, 6)]
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x01")  # a crash mid-entry
    assert TransactionIndex(path).entries == [AbortedTxn(1, 0, 5, 6)]
    assert path.stat().st_size == ENTRY_SIZE


def test_the_index_goes_with_its_segment_and_is_cut_with_the_log(tmp_path):
    from broker.records.control import build_marker
    from tests.helpers.clock import Clock
    from tests.helpers.log_batches import append, batch, open_log

    clock = Clock(10**12)
    log = open_log(tmp_path, clock, retention_ms=1_000, file_delete_delay_ms=0)
    append(log, batch(tag=1))  # 0
    append(log, build_marker(5, 0, False, 0, 1_000))  # 1
    log.add_aborted_txn(AbortedTxn(5, 0, 1, 2))
    (index,) = (tmp_path / "t-0").glob("*.txnindex")
    log.roll()
    append(log, batch(tag=2))  # 2, in the second segment
    log.truncate_to(2)  # nothing of the first segment goes
    assert log.aborted_transactions(0, 3) == [AbortedTxn(5, 0, 1, 2)]
    log.delete_expired(clock())  # the first segment is old: it goes with its index
    log.collect_deleted(clock())
    assert not index.exists() and not list((tmp_path / "t-0").glob("*.txnindex*"))
    log.close()
