"""Rolling, flushing, retention, delayed deletion, truncation and timestamp lookups."""

from __future__ import annotations

import os

import pytest

from broker.log import Log, LogConfig, LogDeleted, OffsetOutOfRange
from broker.records.batch import build_batch
from broker.records.header import CODEC_ZSTD
from tests.helpers.clock import Clock
from tests.helpers.log_batches import append, batch, batch_offsets, data_of, open_log


# -- rolling -----------------------------------------------------------------------------
def test_rolls_when_the_active_segment_would_pass_segment_bytes(tmp_path):
    one = batch(1, value_size=100)
    log = open_log(tmp_path, segment_bytes=len(one) * 3)
    for _ in range(7):
        append(log, one)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert all(s.size <= len(one) * 3 for s in log.segments)
    assert sorted(os.listdir(log.dir))[:3] == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
    ]


def test_an_oversized_batch_still_goes_into_an_empty_segment(tmp_path):
    log = open_log(tmp_path, segment_bytes=100)
    append(log, batch(1, value_size=500))
    append(log, batch(1, value_size=500))
    assert [s.base_offset for s in log.segments] == [0, 1]


def test_rolls_by_age_of_the_first_batch(tmp_path):
    clock = Clock()
    log = open_log(tmp_path, clock, segment_ms=1000)
    append(log, batch(1))
    clock.now += 1000
    append(log, batch(1))
    assert len(log.segments) == 1
    clock.now += 1
    append(log, batch(1))
    assert [s.base_offset for s in log.segments] == [0, 2]
    # An empty segment does not age: the clock starts at its first batch.
    log.roll()
    clock.now += 10_000
    append(log, batch(1))
    append(log, batch(1))
    assert [s.base_offset for s in log.segments] == [0, 2, 3]


def test_roll_is_a_no_op_on_an_empty_active_segment(tmp_path):
    log = open_log(tmp_path)
    assert log.roll() is log.active_segment
    append(log, batch(2))
    log.roll()
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 2]


# -- flushing ----------------------------------------------------------------------------
def test_flushes_after_flush_interval_messages(tmp_path, monkeypatch):
    fsynced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsynced.append(fd), real_fsync(fd)))
    log = open_log(tmp_path, flush_interval_messages=5)
    fsynced.clear()
    append(log, batch(2))
    append(log, batch(2))
    assert log.recovery_point == 0 and log.unflushed_messages == 4
    assert log.active_segment.fd not in fsynced
    append(log, batch(1))
    assert log.active_segment.fd in fsynced
    assert log.recovery_point == 5 and log.unflushed_messages == 0


def test_flush_up_to_the_active_segment_leaves_it_unflushed(tmp_path):
    log = open_log(tmp_path, segment_bytes=300)
    for _ in range(6):
        append(log, batch(3))
    assert log.has_unflushed_sealed_segments
    log.flush(log.active_segment.base_offset)
    assert log.recovery_point == log.active_segment.base_offset
    assert not log.has_unflushed_sealed_segments
    assert log.active_segment.dirty
    log.flush()
    assert log.recovery_point == log.log_end_offset


# -- retention ---------------------------------------------------------------------------
def timestamped_log(tmp_path, clock, **config) -> Log:
    """Five segments of two batches each; segment k holds timestamps around k * 1000."""
    one = batch(1, value_size=50)
    log = open_log(tmp_path, clock, segment_bytes=len(one) * 2, file_delete_delay_ms=500, **config)
    for i in range(10):
        append(log, batch(1, value_size=50, timestamp=(i // 2) * 1000 + i % 2))
    assert len(log.segments) == 5
    return log


def test_retention_by_time_deletes_the_oldest_expired_segments(tmp_path):
    clock = Clock(10_000)
    log = timestamped_log(tmp_path, clock, retention_ms=7_500)
    # Segments whose newest record is older than now - retention (2_500): those of 0..1001, 1000..1001, 2000..2001.
    assert log.delete_expired(clock.now) == 3
    assert log.log_start_offset == 6
    assert [s.base_offset for s in log.segments] == [6, 8]
    with pytest.raises(OffsetOutOfRange):
        log.read(5, 1 << 20)
    assert batch_offsets(data_of(log.read(6, 1 << 20)))[0] == (6, 6)
    assert log.delete_expired(clock.now) == 0


def test_expired_active_segment_is_rolled_then_deleted(tmp_path):
    clock = Clock(100_000)
    log = timestamped_log(tmp_path, clock, retention_ms=1_000)
    assert log.delete_expired(clock.now) == 5
    assert log.log_start_offset == log.log_end_offset == 10
    assert [(s.base_offset, s.size) for s in log.segments] == [(10, 0)]
    assert log.read(10, 1 << 20).regions == []
    assert append(log, batch(1)).first_offset == 10


def test_retention_never_deletes_past_the_high_watermark(tmp_path):
    clock = Clock(100_000)
    log = timestamped_log(tmp_path, clock, retention_ms=1_000)
    assert log.delete_expired(clock.now, high_watermark=5) == 2
    assert log.log_start_offset == 4


def test_unlimited_retention_keeps_everything(tmp_path):
    clock = Clock(10**12)
    log = timestamped_log(tmp_path, clock, retention_ms=-1)
    assert log.delete_expired(clock.now) == 0


def test_retention_by_size_deletes_oldest_segments_while_over_the_limit(tmp_path):
    clock = Clock(10_000)
    log = timestamped_log(tmp_path, clock, retention_ms=-1)
    segment_size = log.segments[0].size
    log.config = LogConfig(
        segment_bytes=log.config.segment_bytes,
        retention_ms=-1,
        retention_bytes=segment_size * 2 + 1,
    )
    assert log.delete_expired(clock.now) == 2
    assert log.size_bytes == segment_size * 3
    assert log.log_start_offset == 4
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 1 << 20)


def test_deleted_segments_stay_readable_until_the_delay_passes(tmp_path):
    clock = Clock(10_000)
    log = timestamped_log(tmp_path, clock, retention_ms=7_500)
    in_flight = log.read(0, 1 << 20).regions[0]  # a fetch being sent
    expected = in_flight.read()
    log.delete_expired(clock.now)
    names = sorted(os.listdir(log.dir))
    assert "00000000000000000000.log.deleted" in names
    assert "00000000000000000000.log" not in names
    assert in_flight.read() == expected
    assert log.collect_deleted(clock.now + 499) == 0
    assert log.collect_deleted(clock.now + 500) == 3
    assert not any(n.endswith(".deleted") for n in os.listdir(log.dir))


# -- timestamps --------------------------------------------------------------------------
def test_offset_for_timestamp_returns_the_first_record_reaching_it(tmp_path):
    log = open_log(tmp_path, segment_bytes=400, index_interval_bytes=0)
    for i in range(30):
        append(log, batch(2, timestamp=i * 100, tag=i))  # records at i*100, i*100 + 1
    assert len(log.segments) > 3
    assert log.offset_for_timestamp(0) == (0, 0)
    assert log.offset_for_timestamp(1) == (1, 1)  # the second record of the first batch
    assert log.offset_for_timestamp(2) == (2, 100)
    assert log.offset_for_timestamp(1_550) == (32, 1_600)
    assert log.offset_for_timestamp(2_901) == (59, 2_901)
    assert log.offset_for_timestamp(2_902) is None
    # Nothing at or past max_offset (the high watermark) is an answer.
    assert log.offset_for_timestamp(2_901, max_offset=59) is None
    assert log.offset_for_timestamp(2_900, max_offset=59) == (58, 2_900)


def test_offset_for_timestamp_inside_a_compressed_batch(tmp_path):
    log = open_log(tmp_path)
    records = [(None, b"v%d" % i, ts, []) for i, ts in enumerate((1_234, 999_999_999_999, 5))]
    append(log, build_batch(records, codec=CODEC_ZSTD))
    assert log.offset_for_timestamp(999_999_999_999) == (1, 999_999_999_999)
    assert log.offset_for_timestamp(1_000) == (0, 1_234)
    assert log.offset_for_timestamp(2_000) == (1, 999_999_999_999)
    assert log.max_timestamp_and_offset() == (1, 999_999_999_999)


def test_max_timestamp_is_per_record_across_segments_and_below_the_limit(tmp_path):
    log = open_log(tmp_path, segment_bytes=200)  # two batches a segment
    assert log.max_timestamp_and_offset() is None
    for i, ts in enumerate((500, 100, 900, 300, 900, 1_200)):
        append(log, batch(2, timestamp=ts, tag=i))  # records at ts and ts + 1
    assert len(log.segments) == 3
    assert log.max_timestamp_and_offset() == (11, 1_201)
    assert log.max_timestamp_and_offset(max_offset=11) == (10, 1_200)
    # Two records share the maximum (901 at offsets 5 and 9): the first one wins.
    assert log.max_timestamp_and_offset(max_offset=10) == (5, 901)
    log.close()
    again = open_log(tmp_path, segment_bytes=200)
    assert again.max_timestamp_and_offset() == (11, 1_201)


def test_offset_for_timestamp_with_out_of_order_timestamps(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=0)
    for ts in (500, 100, 900, 300, 1_200):
        append(log, batch(1, timestamp=ts))
    assert log.offset_for_timestamp(600) == (2, 900)
    assert log.offset_for_timestamp(1_000) == (4, 1_200)
    assert log.offset_for_timestamp(50) == (0, 500)


def test_offset_for_timestamp_survives_a_restart(tmp_path):
    log = open_log(tmp_path, segment_bytes=400)
    for i in range(30):
        append(log, batch(2, timestamp=i * 100, tag=i))
    expected = [log.offset_for_timestamp(t) for t in (0, 777, 2_000, 5_000)]
    log.close()
    again = open_log(tmp_path, segment_bytes=400)
    # Sealed segments answer from their time index (loaded lazily), not from a scan.
    assert [again.offset_for_timestamp(t) for t in (0, 777, 2_000, 5_000)] == expected


# -- truncation and deletion -------------------------------------------------------------
def test_truncate_to_drops_whole_batches_and_later_segments(tmp_path):
    log = open_log(tmp_path, segment_bytes=400, file_delete_delay_ms=0)
    for i in range(30):
        append(log, batch(2, tag=i))
    log.truncate_to(21)  # inside the batch 20..21
    assert log.log_end_offset == 20
    assert batch_offsets(data_of(log.read(0, 1 << 30)))[-1] == (18, 19)
    assert append(log, batch(1)).first_offset == 20
    assert not any(s.base_offset > 20 for s in log.segments)
    log.close()
    assert open_log(tmp_path, segment_bytes=400).log_end_offset == 21


def test_delete_removes_the_partition_after_the_delay(tmp_path):
    clock = Clock()
    log = open_log(tmp_path, clock, file_delete_delay_ms=1000)
    append(log, batch(3))
    region = log.read(0, 1 << 20).regions[0]
    log.delete()
    assert not (tmp_path / "t-0").exists()
    assert region.read()  # an in-flight fetch still reads
    with pytest.raises(LogDeleted):
        log.read(0, 100)
    log.collect_deleted(clock.now + 1000)
    assert os.listdir(tmp_path) == []


def test_truncate_below_the_log_start_starts_over_at_that_offset(tmp_path):
    clock = Clock(100_000)
    log = timestamped_log(tmp_path, clock, retention_ms=1_000)
    log.delete_expired(clock.now, high_watermark=5)
    assert log.log_start_offset == 4
    log.truncate_to(2)
    assert (log.log_start_offset, log.log_end_offset) == (2, 2)
    assert [s.base_offset for s in log.segments] == [2]
    assert append(log, batch(1)).first_offset == 2
