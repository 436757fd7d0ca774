"""HeapFreezer (broker/util/heap.py): after a full collection the survivors are frozen,
so the next one walks only what came after; every THAW_INTERVAL_MS they are given back."""

from __future__ import annotations

import gc

from broker.util.heap import THAW_INTERVAL_MS, HeapFreezer


def test_full_collections_freeze_their_survivors_and_thawing_gives_them_back():
    gc.collect()
    gc.unfreeze()
    gc.disable()  # only the collections the test makes
    freezer = HeapFreezer(now_ms=0)
    try:
        kept = [[i] for i in range(10_000)]  # long-lived state
        gc.collect(1)  # a younger collection freezes nothing
        assert gc.get_freeze_count() == 0 and freezer.freezes == 0
        gc.collect()  # a full one: what survived is frozen
        assert freezer.freezes == 1
        assert gc.get_freeze_count() >= len(kept)
        freezer.tick(THAW_INTERVAL_MS - 1)
        assert gc.get_freeze_count() >= len(kept)
        freezer.tick(THAW_INTERVAL_MS)  # back to the collector, cycles among them reclaimable
        assert gc.get_freeze_count() == 0
    finally:
        freezer.close()
        gc.unfreeze()  # this test process is not a broker's
        gc.enable()
    gc.collect()
    assert freezer.freezes == 1  # closed: no longer listening
