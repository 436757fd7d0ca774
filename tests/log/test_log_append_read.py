"""Appending assigns offsets; reads return whole batches as file regions."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log import Log, LogConfig, OffsetOutOfRange, RecordTooLarge
from broker.records.batch import decode_batch
from broker.records.header import TIMESTAMP_TYPE_LOG_APPEND, crc_is_valid, parse_header
from tests.helpers.log_batches import append, batch, batch_offsets, data_of, produced


def open_log(path, **config) -> Log:
    return Log.open(path / "t-0", "t", 0, LogConfig(**config))


def test_offsets_are_consecutive_across_batches_appends_and_restarts(tmp_path):
    log = open_log(tmp_path, segment_bytes=500)
    info = append(log, batch(3), batch(2), batch(1))
    assert (info.first_offset, info.last_offset) == (0, 5)
    assert log.log_end_offset == 6
    for _ in range(20):
        append(log, batch(4))
    assert log.log_end_offset == 86
    assert len(log.segments) > 3
    log.close()

    log = open_log(tmp_path, segment_bytes=500)
    assert log.log_end_offset == 86
    info = append(log, batch(2))
    assert (info.first_offset, info.last_offset) == (86, 87)
    offsets = batch_offsets(data_of(log.read(0, 1 << 30)))
    assert offsets[0] == (0, 2)
    assert all(nxt[0] == prev[1] + 1 for prev, nxt in zip(offsets, offsets[1:], strict=False))
    assert offsets[-1] == (86, 87)


def test_append_rewrites_offset_and_epoch_in_place_keeping_the_crc(tmp_path):
    log = open_log(tmp_path)
    append(log, batch(2))
    records, positions = produced(batch(3, tag=7))
    original_crc = positions[0][1].crc
    log.append(records, positions, leader_epoch=5)
    stored = data_of(log.read(2, 1 << 20))
    header = parse_header(stored)
    assert (header.base_offset, header.partition_leader_epoch, header.crc) == (2, 5, original_crc)
    assert crc_is_valid(stored, 0, header)
    assert stored == bytes(records)
    _, decoded = decode_batch(stored)
    assert [r.offset for r in decoded] == [2, 3, 4]
    assert decoded[0].value.startswith(b"7:")


def test_log_append_time_stamps_the_batch_with_a_valid_crc(tmp_path):
    log = open_log(tmp_path)
    records, positions = produced(batch(2, timestamp=5))
    info = log.append(records, positions, leader_epoch=0, log_append_time_ms=123_456)
    assert info.max_timestamp == 123_456
    header = parse_header(data_of(log.read(0, 1 << 20)))
    assert header.attributes & TIMESTAMP_TYPE_LOG_APPEND
    assert header.max_timestamp == 123_456
    assert crc_is_valid(data_of(log.read(0, 1 << 20)), 0, header)


def test_append_info_reports_the_max_timestamp(tmp_path):
    log = open_log(tmp_path)
    info = append(log, batch(2, timestamp=50), batch(3, timestamp=900), batch(1, timestamp=10))
    assert info.max_timestamp == 902
    assert info.offset_of_max_timestamp == 2  # base offset of the batch holding it


def test_batches_larger_than_max_message_bytes_are_refused(tmp_path):
    log = open_log(tmp_path, max_message_bytes=200)
    with pytest.raises(RecordTooLarge):
        append(log, batch(1, value_size=300))
    assert log.log_end_offset == 0
    assert log.size_bytes == 0


def test_read_from_the_middle_of_a_batch_returns_the_containing_batch(tmp_path):
    log = open_log(tmp_path)
    append(log, batch(5), batch(5), batch(5))
    result = log.read(7, 1 << 20)
    assert result.first_batch_offset == 5
    assert batch_offsets(data_of(result)) == [(5, 9), (10, 14)]
    assert result.size == len(data_of(result))


def test_read_stops_before_batches_at_or_past_max_offset(tmp_path):
    log = open_log(tmp_path)
    append(log, batch(5), batch(5), batch(5))
    assert batch_offsets(data_of(log.read(0, 1 << 20, max_offset=10))) == [(0, 4), (5, 9)]
    # A high watermark inside a batch still excludes only batches that start at or past it.
    assert batch_offsets(data_of(log.read(0, 1 << 20, max_offset=7))) == [(0, 4), (5, 9)]
    assert log.read(10, 1 << 20, max_offset=10).regions == []
    assert log.read(12, 1 << 20, max_offset=10).regions == []


def test_read_at_the_log_end_is_empty_and_outside_the_log_raises(tmp_path):
    log = open_log(tmp_path)
    append(log, batch(3))
    empty = log.read(3, 1 << 20)
    assert (empty.regions, empty.size) == ([], 0)
    with pytest.raises(OffsetOutOfRange):
        log.read(4, 1 << 20)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 1 << 20)
    assert issubclass(OffsetOutOfRange, ValueError)


def test_read_respects_max_bytes_in_whole_batches(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=100)
    one = batch(1, value_size=100)
    for _ in range(50):
        append(log, one)
    size = len(one)
    result = log.read(0, size * 10 + size // 2)
    assert result.size == size * 10
    assert batch_offsets(data_of(result)) == [(i, i) for i in range(10)]


def test_first_batch_comes_whole_even_past_max_bytes_kip74(tmp_path):
    log = open_log(tmp_path)
    append(log, batch(1, value_size=5000), batch(1))
    result = log.read(0, 100)
    assert batch_offsets(data_of(result)) == [(0, 0)]
    assert result.size > 5000
    result = log.read(1, 1)
    assert batch_offsets(data_of(result)) == [(1, 1)]


def test_reads_continue_across_segment_boundaries(tmp_path):
    log = open_log(tmp_path, segment_bytes=400)
    for i in range(40):
        append(log, batch(2, tag=i))
    assert len(log.segments) > 5
    result = log.read(3, 1 << 20)
    assert len(result.regions) == len(log.segments)
    assert batch_offsets(data_of(result)) == [(i, i + 1) for i in range(2, 80, 2)]
    # A budget that ends inside the second segment.
    first_segment = log.segments[0].size
    result = log.read(0, first_segment + 300)
    offsets = batch_offsets(data_of(result))
    assert len(result.regions) == 2
    assert result.size <= first_segment + 300
    assert offsets[0] == (0, 1) and offsets[-1][1] < 79


def test_regions_are_file_slices_of_the_segment(tmp_path):
    log = open_log(tmp_path)
    append(log, batch(2), batch(3))
    region = log.read(2, 1 << 20).regions[0]
    assert region.fd == log.active_segment.fd
    assert os.pread(region.fd, region.size, region.position) == region.read()


def test_a_large_read_costs_a_handful_of_preads(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    for i in range(200):  # ~16 KiB batches, like a busy producer's
        append(log, batch(1, value_size=16_000, tag=i))
    calls = []
    real_pread = os.pread

    def counting_pread(fd, n, pos):
        calls.append(n)
        return real_pread(fd, n, pos)

    monkeypatch.setattr(os, "pread", counting_pread)
    result = log.read(57, 1 << 20, max_offset=150)
    assert 60 <= len(result.regions[0]) // 16_000 <= 66
    assert len(calls) <= 3


def test_follower_append_keeps_offsets(tmp_path):
    log = open_log(tmp_path)
    from broker.records.batch import build_batch

    leader_batch = build_batch([(None, b"v", 1, [])] * 3, base_offset=0)
    info = log.append_as_follower(*produced(leader_batch))
    assert (info.first_offset, info.last_offset) == (0, 2)
    with pytest.raises(ValueError):
        log.append_as_follower(*produced(leader_batch))
    assert log.log_end_offset == 3


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 5), st.integers(0, 700)), min_size=1, max_size=60),
    interval=st.sampled_from([0, 64, 500, 4096]),
    probes=st.lists(st.integers(0, 10_000), max_size=10),
    budget=st.integers(1, 6000),
)
def test_index_lookups_agree_with_a_full_scan(tmp_path_factory, sizes, interval, probes, budget):
    path = tmp_path_factory.mktemp("log")
    log = open_log(path, segment_bytes=3000, index_interval_bytes=interval)
    for count, value_size in sizes:
        append(log, batch(count, value_size=value_size))
    end = log.log_end_offset
    # Ground truth: walk every byte of every segment.
    everything = data_of(log.read(0, 1 << 30))
    scan = batch_offsets(everything)
    assert scan[-1][1] == end - 1
    for probe in probes:
        offset = probe % end
        containing = next(b for b in scan if b[0] <= offset <= b[1])
        result = log.read(offset, budget)
        got = batch_offsets(data_of(result))
        assert got[0] == containing
        assert result.first_batch_offset == containing[0]
        # Contiguous whole batches, as many as fit (at least one).
        start = scan.index(containing)
        assert got == scan[start : start + len(got)]
        if result.size > budget:
            assert len(got) == 1
        # Each segment's index lands at or before the batch holding the offset.
        for segment in log.segments:
            if segment.base_offset <= offset < segment.next_offset:
                indexed, _ = segment.offset_index.lookup(offset)
                assert segment.base_offset <= indexed <= containing[0]


def test_follower_offsets_far_past_the_segment_base_start_a_new_segment(tmp_path):
    from broker.records.batch import build_batch

    log = open_log(tmp_path)
    far = 2**31 + 10
    log.append_as_follower(*produced(build_batch([(None, b"v", 1, [])], base_offset=far)))
    assert [s.base_offset for s in log.segments] == [far]
    assert log.log_start_offset == far
    assert not (log.dir / "00000000000000000000.log").exists()
    log.append_as_follower(*produced(build_batch([(None, b"w", 2, [])], base_offset=2 * far)))
    assert [s.base_offset for s in log.segments] == [far, 2 * far]
    assert batch_offsets(data_of(log.read(far, 1 << 20))) == [(far, far), (2 * far, 2 * far)]


def test_reads_near_the_log_end_agree_with_a_scan_and_a_reopened_log(tmp_path):
    """The active segment finds batches appended since its last index entry from memory
    (segment.py, the tail); a reopened log has none there and walks from the index: both
    must read what a scan of every batch says, across offset gaps, max_offset cuts, byte
    budgets ending at a batch boundary, and truncation."""
    from broker.records.batch import build_batch, iter_batches

    def follow(log, start: int, n: int) -> int:
        for i in range(n):
            base = start + i % 3  # a gap of 0-2 offsets before each batch
            count = 1 + i % 4
            records = [(None, b"v" * (i % 50), 1, [])] * count
            log.append_as_follower(*produced(build_batch(records, base_offset=base)))
            start = base + count
        return start

    def expected(scan, offset: int, max_offset: int, budget: int) -> list:
        got, size = [], 0
        for base, last, n in scan:
            if last < offset:
                continue
            if base >= max_offset or (got and size + n > budget):
                break
            got.append((base, last))
            size += n
        return got

    def check(log) -> None:
        data = data_of(log.read(log.log_start_offset, 1 << 30))
        scan = [(h.base_offset, h.last_offset, h.size) for _, h in iter_batches(data)]
        end = log.log_end_offset
        for o in range(log.log_start_offset, end):
            for m in (o + 1, o + 3, end):
                sizes = [n for base, last, n in scan if last >= o and base < m]
                # Budgets ending exactly at a batch boundary, and just short of one.
                for budget in {1, 150, sum(sizes[:2]), sum(sizes[:3]) - 1}:
                    got = batch_offsets(data_of(log.read(o, budget, m)))
                    assert got == expected(scan, o, m, budget), (o, m, budget)

    log = open_log(tmp_path, index_interval_bytes=400)
    follow(log, 0, 40)
    check(log)
    log.close()
    log = open_log(tmp_path, index_interval_bytes=400)
    check(log)
    end = follow(log, log.log_end_offset, 30)
    log.truncate_to(end - 20)
    follow(log, log.log_end_offset + 1, 10)
    check(log)
    log.close()
    check(open_log(tmp_path, index_interval_bytes=400))
