"""Compaction of a log holding transactions: an aborted record never supersedes a
committed one and goes itself; markers stay; the aborted index follows the cleaned
segment."""

from __future__ import annotations

from broker.log import LogConfig, LogManager
from broker.log.cleaner import LogCleaner, PartitionState
from broker.log.txn_index import AbortedTxn
from broker.records.batch import build_batch, iter_batches, iter_records
from broker.records.control import build_marker
from broker.records.rewrite import delete_horizon
from tests.helpers.clock import Clock
from tests.helpers.log_batches import append, data_of

CONFIG = LogConfig(
    segment_bytes=400,
    index_interval_bytes=128,
    cleanup_policy=("compact",),
    min_cleanable_dirty_ratio=0.0,
)
PID = 9


def test_aborted_records_go_and_never_shadow_committed_ones(tmp_path):
    clock = Clock()
    manager = LogManager([tmp_path], CONFIG, now_ms=clock)
    manager.load()
    log = manager.create("t", 0)
    append(log, build_batch([(b"k", b"committed", clock.now, [])]))  # 0
    aborted = build_batch(
        [(b"k", b"aborted", clock.now, [])],
        producer_id=PID, producer_epoch=0, base_sequence=0, transactional=True,
    )  # fmt: skip
    append(log, aborted)  # 1
    append(log, build_marker(PID, 0, False, 0, clock.now))  # 2: ABORT
    log.add_aborted_txn(AbortedTxn(PID, 1, 2, 3))
    for i in range(40):  # other keys, enough to seal the segments above
        append(log, build_batch([(b"other-%d" % (i % 3), b"v", clock.now, [])]))
    state = PartitionState(log.log_end_offset, {})
    cleaner = LogCleaner(manager, now_ms=clock, partition_state=lambda _: state)
    assert cleaner.clean_once() is not None
    data = data_of(log.read(0, 1 << 30))
    keyed = [(r.offset, r.value) for r in iter_records(data) if r.key == b"k"]
    assert keyed == [(0, b"committed")]
    markers = [h.base_offset for _, h in iter_batches(data) if h.is_control]
    assert markers == [2]
    assert log.aborted_transactions(0, log.log_end_offset) == [AbortedTxn(PID, 1, 2, 3)]
    manager.close()


def test_markers_go_a_delete_retention_after_their_transactions_records(tmp_path):
    """Kafka's rule: a marker stays while its transaction has a batch in the log; then it
    gets a delete horizon and goes at the first cleaning after it, with its index entry."""
    clock = Clock()
    config = LogConfig(
        segment_bytes=400,
        index_interval_bytes=128,
        cleanup_policy=("compact",),
        min_cleanable_dirty_ratio=0.0,
        delete_retention_ms=1_000,
    )
    manager = LogManager([tmp_path], config, now_ms=clock)
    manager.load()
    log = manager.create("t", 0)

    def txn(pid: int, key: bytes) -> bytes:
        return build_batch([(key, b"v", clock.now, [])], producer_id=pid, producer_epoch=0,
                           base_sequence=0, transactional=True)  # fmt: skip

    append(log, txn(PID, b"a"))  # 0, aborted
    append(log, build_marker(PID, 0, False, 0, clock.now))  # 1
    log.add_aborted_txn(AbortedTxn(PID, 0, 1, 2))
    append(log, txn(PID + 1, b"c"))  # 2, committed, superseded below
    append(log, build_marker(PID + 1, 0, True, 0, clock.now))  # 3
    state = PartitionState(10**9, {})  # no producer the partition still tracks
    cleaner = LogCleaner(manager, now_ms=clock, partition_state=lambda _: state)

    def more() -> None:  # dirty data: the same keys again, sealing the segments above
        for i in range(30):
            append(log, build_batch([(b"c" if i % 2 else b"x", b"v", clock.now, [])]))

    def markers() -> list[tuple[int, bool]]:
        """(offset, has a delete horizon) of each marker left."""
        data = data_of(log.read(0, 1 << 30))
        return [(h.base_offset, delete_horizon(h) is not None)
                for _, h in iter_batches(data) if h.is_control and h.records_count]  # fmt: skip

    more()
    cleaner.clean_once()  # the walk met both transactions' batches: the markers stay
    assert markers() == [(1, False), (3, False)]
    assert log.aborted_transactions(0, 100) == [AbortedTxn(PID, 0, 1, 2)]
    more()
    cleaner.clean_once()  # no batch left: the markers get their delete horizon
    assert markers() == [(1, True), (3, True)]
    clock.now += 1_001
    more()
    cleaner.clean_once()
    assert markers() == []
    assert log.aborted_transactions(0, 100) == []
    manager.close()
