"""Compaction of a log holding transactions: an aborted record never supersedes a
committed one and goes itself; markers stay; the aborted index follows the cleaned
segment."""

from __future__ import annotations

from broker.log import LogConfig, LogManager
from broker.log.cleaner import LogCleaner, PartitionState
from broker.log.txn_index import AbortedTxn
from broker.records.batch import build_batch, iter_batches, iter_records
from broker.records.control import build_marker
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
