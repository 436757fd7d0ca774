"""A crash at every step of a segment swap: the files are left as the process dying at
that step leaves them, then the log is opened again. Before the commit point the log
reads exactly as before the cleaning, after it exactly as after; never a lost or
duplicated record. And the swap as the running broker sees it: readers holding regions
of the old segments keep reading them."""

from __future__ import annotations

import os

import pytest

from broker.log import Log, LogConfig, LogManager
from broker.log.cleaner import LogCleaner
from broker.log.swap import swap_steps
from broker.records.batch import build_batch, iter_records
from tests.helpers.clock import Clock
from tests.helpers.log_batches import append, data_of

CONFIG = LogConfig(
    segment_bytes=700,
    index_interval_bytes=100,
    cleanup_policy=("compact",),
    min_cleanable_dirty_ratio=0.0,
)


def filled(path, clock) -> LogManager:
    """A compacted log of many superseded updates over about a dozen segments."""
    manager = LogManager([path], CONFIG, now_ms=clock)
    manager.load()
    log = manager.create("t", 0)
    for i in range(120):
        key = b"k%d" % (i % 9)
        value = None if i % 17 == 0 else b"value-%d" % i
        append(log, build_batch([(key, value, clock.now + i, [("h", b"%d" % i)])]))
    return manager


def records(log: Log) -> list[tuple]:
    data = data_of(log.read(log.log_start_offset, 1 << 30))
    return [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in iter_records(data)]


def crash(manager: LogManager, *extra) -> None:
    """Die: close every fd, write nothing more (no flush, no checkpoint, no cleanup)."""
    for log in manager.logs():
        for segment in log.segments:
            segment.close()
        for _, segment in log._pending_deletes:
            segment.close()
    for segment in extra:
        segment.close()


def reopen(path, clock) -> Log:
    manager = LogManager([path], CONFIG, now_ms=clock)
    manager.load()
    return manager.get("t", 0)


def cleaned_job(path, clock):
    manager = filled(path, clock)
    log = manager.get("t", 0)
    cleaner = LogCleaner(manager, now_ms=clock)
    job = cleaner.grab_filthiest()
    result = job.run()
    return manager, log, result


def reference(tmp_path, clock):
    """What the log reads before and after the whole cleaning, and each swap's steps:
    two index files, the log file, every file of each old segment, two, one."""
    manager, log, result = cleaned_job(tmp_path / "reference", clock)
    before = records(log)
    ranges = [(old[0].base_offset, old[-1].next_offset) for old, _ in result.swaps]
    step_counts = [2 + 1 + 3 * len(old) + 2 + 1 for old, _ in result.swaps]
    for old, new in result.swaps:
        assert log.replace_segments(old, new)
    after = records(log)
    manager.close()
    return before, after, ranges, step_counts


def test_a_crash_at_every_step_loses_and_duplicates_nothing(tmp_path):
    clock = Clock()
    before, after, ranges, counts = reference(tmp_path, clock)
    assert len(ranges) >= 3 and before != after
    # The swap commits when `.log.cleaned` becomes `.log.swap`: its third step.
    commit_step = 3
    cases = [(g, k) for g, count in enumerate(counts) for k in range(count + 1)]
    for n, (group, steps_done) in enumerate(cases):
        path = tmp_path / f"case-{n}"
        manager, log, result = cleaned_job(path, clock)
        # The groups before this one swapped in completely, as the loop does in turn.
        for old, new in result.swaps[:group]:
            assert log.replace_segments(old, new)
        old, new = result.swaps[group]
        walk = swap_steps(new, old)
        for _ in range(steps_done):
            next(walk)
        if steps_done == counts[group]:
            assert next(walk, None) is None
        crash(manager, *(segment for _, segment in result.swaps[group:]))
        reopened = reopen(path, clock)
        committed = set(range(group)) | ({group} if steps_done >= commit_step else set())
        expected = sorted(
            [r for r in after if _in(r[0], ranges, committed)]
            + [r for r in before if not _in(r[0], ranges, committed)]
        )
        got = records(reopened)
        assert got == expected, (group, steps_done)
        assert not [p for p in os.listdir(reopened.dir) if p.endswith((".cleaned", ".swap"))]
        reopened.close()


def _in(offset: int, ranges, groups) -> bool:
    return any(ranges[g][0] <= offset < ranges[g][1] for g in groups)


def test_a_region_handed_out_before_the_swap_still_reads_the_old_data(tmp_path):
    clock = Clock()
    manager, log, result = cleaned_job(tmp_path, clock)
    region_data_before = data_of(log.read(0, 1 << 30))
    regions = log.read(0, 1 << 30).regions
    cleaner_result = result
    for old, new in cleaner_result.swaps:
        assert log.replace_segments(old, new)
    assert b"".join(r.read() for r in regions) == region_data_before
    assert data_of(log.read(0, 1 << 30)) != region_data_before
    manager.close()


def test_a_swap_whose_segments_retention_removed_is_dropped(tmp_path):
    clock = Clock()
    manager, log, result = cleaned_job(tmp_path, clock)
    old, new = result.swaps[0]
    log._delete_oldest(1, clock.now)  # retention took the first old segment meanwhile
    before = records(log)
    assert not log.replace_segments(old, new)
    assert records(log) == before
    assert not [p for p in new.paths() if p.exists()]
    for old, new in result.swaps[1:]:  # the later groups still swap in
        assert log.replace_segments(old, new)
    manager.close()


@pytest.mark.parametrize("truncate", [True, False])
def test_the_cleaner_drops_work_on_a_log_truncated_meanwhile(tmp_path, truncate):
    clock = Clock()
    manager = filled(tmp_path, clock)
    log = manager.get("t", 0)
    cleaner = LogCleaner(manager, now_ms=clock)
    job = cleaner.grab_filthiest()
    result = job.run()
    if truncate:
        log.truncate_to(30)
    before = records(log)
    assert cleaner.apply(job, result) is not truncate
    if truncate:
        assert records(log) == before
        assert cleaner.first_dirty_offset("t", 0) is None
    manager.close()
