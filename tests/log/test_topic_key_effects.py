"""The effects of the segment and compaction topic keys of issue 24 on a log: roll jitter,
index size, preallocation (and recovery of its zero tail), the per-topic delete delay,
and max.compaction.lag.ms making a log cleanable (docs/contracts/topic-configs.md)."""

from __future__ import annotations

import os
import random

import pytest

from broker.log import LogConfig, LogManager
from broker.log.cleaner import CleanerConfig, LogCleaner
from broker.log.compaction import SegmentInfo, max_compaction_delay
from broker.log.log import Log
from broker.records.batch import build_batch, iter_records
from broker.server.topic_config import TopicConfigs
from tests.helpers.clock import Clock
from tests.helpers.log_batches import append, batch, batch_offsets, data_of, open_log


# -- segment.jitter.ms -------------------------------------------------------------------
def test_jitter_is_chosen_below_the_smaller_of_jitter_and_roll_time():
    rng = random.Random(7)
    assert LogConfig(segment_jitter_ms=0).random_segment_jitter(rng) == 0
    chosen = {LogConfig(segment_ms=50, segment_jitter_ms=1000).random_segment_jitter(rng)}
    chosen |= {LogConfig(segment_ms=50, segment_jitter_ms=1000).random_segment_jitter(rng)}
    assert all(0 <= j < 50 for j in chosen)
    spread = {LogConfig(segment_jitter_ms=300).random_segment_jitter(rng) for _ in range(200)}
    assert min(spread) >= 0 and max(spread) < 300 and len(spread) > 50


@pytest.mark.parametrize("jitter, rolled", [(0, False), (300, True)])
def test_a_segment_rolls_its_jitter_before_segment_ms(tmp_path, jitter, rolled):
    clock = Clock(10_000)
    log = open_log(tmp_path, clock, segment_ms=1_000)
    append(log, batch(1))
    log.active_segment.roll_jitter_ms = jitter  # what the log chose for it, fixed here
    clock.now += 800  # past 1000 - 300, not past 1000
    append(log, batch(1))
    assert (len(log.segments) == 2) is rolled
    log.close()


def test_new_segments_get_their_own_jitter(tmp_path):
    clock = Clock(10_000)
    log = open_log(tmp_path, clock, segment_bytes=1024, segment_jitter_ms=1_000_000)
    for _ in range(40):
        append(log, batch(1, value_size=200))
    jitters = {s.roll_jitter_ms for s in log.segments}
    assert len(log.segments) > 5 and len(jitters) > 1
    assert all(0 <= j < 1_000_000 for j in jitters)
    log.close()


def test_max_compaction_lag_bounds_a_compacted_logs_roll_time():
    assert LogConfig(segment_ms=1000).max_segment_ms == 1000
    compacted = LogConfig(segment_ms=1000, cleanup_policy=("compact",), max_compaction_lag_ms=300)
    assert compacted.max_segment_ms == 300
    assert LogConfig(segment_ms=1000, max_compaction_lag_ms=300).max_segment_ms == 1000


# -- segment.index.bytes -----------------------------------------------------------------
def test_a_full_index_rolls_the_segment(tmp_path):
    # 40 bytes: 5 offset entries, 3 time entries of which one is kept for the seal's max
    # timestamp; one entry per batch (index_interval_bytes=0, rising timestamps).
    log = open_log(tmp_path, Clock(), index_interval_bytes=0, segment_index_bytes=40)
    for i in range(12):
        append(log, batch(1, timestamp=1_000 + i))
    log.roll()
    sealed = log.segments[:-1]
    assert len(sealed) == 6  # 12 batches, 2 per segment: the time index fills first
    for segment in sealed:
        assert segment.offset_index.path.stat().st_size <= 40
        assert segment.time_index.path.stat().st_size <= 36
        # The seal's entry is there: the time index ends with the segment's max timestamp.
        assert segment.time_index.last()[0] == segment.max_timestamp
    assert [o for o, _ in batch_offsets(data_of(log.read(0, 1 << 20)))] == list(range(12))
    log.close()


def test_default_index_size_never_rolls_by_itself(tmp_path):
    log = open_log(tmp_path, Clock(), index_interval_bytes=0)
    for i in range(50):
        append(log, batch(1, timestamp=1_000 + i))
    assert len(log.segments) == 1
    assert log.active_segment.offset_index.max_entries == 10485760 // 8
    log.close()


# -- preallocate -------------------------------------------------------------------------
def test_preallocated_segment_is_full_size_until_it_rolls(tmp_path):
    log = open_log(tmp_path, Clock(), preallocate=True, segment_bytes=64 * 1024)
    first = log.active_segment.log_path
    assert first.stat().st_size == 64 * 1024
    one = batch(1, value_size=100)
    append(log, one)
    assert first.stat().st_size == 64 * 1024
    assert log.size_bytes == len(one)
    assert batch_offsets(data_of(log.read(0, 1 << 20))) == [(0, 0)]
    log.roll()
    assert first.stat().st_size == len(one)  # cut to its data at the roll
    assert log.active_segment.log_path.stat().st_size == 64 * 1024
    log.close()
    assert log.segments[-1].log_path.stat().st_size == 0  # the empty active one, at close


def test_recovery_cuts_the_zero_tail_a_crash_leaves(tmp_path):
    clock = Clock()
    log = open_log(tmp_path, clock, preallocate=True, segment_bytes=64 * 1024)
    for i in range(3):
        append(log, batch(2, tag=i))
    size = log.size_bytes
    for segment in log.segments:  # the process dies: no seal, no trim
        os.close(segment.fd)
        segment.fd = -1
    path = log.active_segment.log_path
    assert path.stat().st_size == 64 * 1024
    reopened = Log.open(
        tmp_path / "t-0", "t", 0, LogConfig(preallocate=True, segment_bytes=64 * 1024), 0, clock
    )
    assert reopened.log_end_offset == 6
    assert path.stat().st_size == size
    append(reopened, batch(1, tag=9))
    records = list(iter_records(data_of(reopened.read(0, 1 << 20)), 0))
    assert [r.offset for r in records] == list(range(7))
    reopened.close()


# -- file.delete.delay.ms per topic --------------------------------------------------------
def test_topic_delete_delay_is_what_its_deleted_segments_wait(tmp_path):
    clock = Clock(100_000)
    default = LogConfig(segment_bytes=1024, retention_ms=1_000, file_delete_delay_ms=0)
    topics = TopicConfigs(default, {"slow": {"file.delete.delay.ms": "5000"}})
    manager = LogManager([tmp_path], default, now_ms=clock)
    manager.load()
    for topic in ("slow", "fast"):
        manager.set_topic_config(topic, topics.log_config(topic))
        log = manager.create(topic, 0)
        for _ in range(10):
            append(log, batch(1, value_size=300, timestamp=1_000))
    for each in manager.logs():
        each.delete_expired(clock.now)

    def deleted(topic):
        return [n for n in os.listdir(manager.get(topic, 0).dir) if n.endswith(".deleted")]

    assert deleted("fast") == [] and deleted("slow")
    manager.tick(clock.now + 4_999)
    assert deleted("slow")
    manager.tick(clock.now + 5_000)
    assert deleted("slow") == []
    manager.close()


# -- max.compaction.lag.ms ---------------------------------------------------------------
def info(base, end, first_ts):
    return SegmentInfo(base, end, 100, first_ts + 10, first_ts)


def test_max_compaction_delay_is_the_oldest_dirty_first_batch_past_the_lag():
    config = LogConfig(cleanup_policy=("compact",), max_compaction_lag_ms=1_000)
    segments = [info(0, 10, 5_000), info(10, 20, 6_000), info(20, 25, 9_000)]  # last: active
    # Nothing dirty is older than now - lag.
    assert max_compaction_delay(segments, 0, config, now_ms=6_000) == 0
    assert max_compaction_delay(segments, 0, config, now_ms=6_500) == 500
    # The first segment is clean: the second one's batch counts.
    assert max_compaction_delay(segments, 10, config, now_ms=7_500) == 500
    # The active segment never counts, nor segments without timestamps.
    assert max_compaction_delay(segments, 20, config, now_ms=99_000) == 0
    assert max_compaction_delay([info(0, 10, -1), segments[2]], 0, config, now_ms=99_000) == 0
    assert max_compaction_delay(segments, 0, LogConfig(), now_ms=99_000) == 0


def test_a_log_past_its_max_compaction_lag_is_cleaned_below_the_dirty_ratio(tmp_path):
    clock = Clock(100_000)
    config = LogConfig(
        segment_bytes=400,
        cleanup_policy=("compact",),
        min_cleanable_dirty_ratio=1.0,  # never by the ratio
        max_compaction_lag_ms=10_000,
        file_delete_delay_ms=0,
    )
    manager = LogManager([tmp_path], config, now_ms=clock)
    manager.load()
    log = manager.create("t", 0)
    for i in range(30):
        append(log, build_batch([(b"key-%d" % (i % 3), b"v%d" % i, clock.now, [])]))
    cleaner = LogCleaner(manager, CleanerConfig(), now_ms=clock)
    clock.now += 9_000
    assert cleaner.grab_filthiest() is None
    clock.now += 2_000
    result = cleaner.clean_once()
    assert result is not None and result.map_end == log.active_segment.base_offset
    kept = [r.key for r in iter_records(data_of(log.read(0, 1 << 20)), 0)]
    below = [k for k in kept[: len(kept) - (log.log_end_offset - result.map_end)]]
    assert len(below) == len(set(below)) <= 3  # one record per key below the active segment
    manager.close()
