"""Recovery on open: a torn or garbage tail is cut off, never served; indexes rebuilt."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log import Log, LogConfig
from broker.log.segment import LogSegment
from broker.records.batch import iter_batches
from tests.helpers.log_batches import append, batch, batch_offsets, data_of

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=64)


def crashed_log(path, batches: int = 12) -> tuple[Log, list[LogSegment]]:
    """A log whose process "died" without a flush: nothing checkpointed (recovery point 0
    is what a missing checkpoint gives)."""
    log = Log.open(path, "t", 0, CONFIG)
    for i in range(batches):
        append(log, batch(3, tag=i))
    segments = log.segments
    for segment in segments:
        segment.seal()  # index files as a rolled segment would have them
        segment.close()
    return log, segments


def reopen(path, recovery_point: int = 0) -> Log:
    return Log.open(path, "t", 0, CONFIG, recovery_point=recovery_point)


def tail_of(log: Log) -> LogSegment:
    return log.segments[-1]


def assert_serves_exactly(log: Log, end: int) -> None:
    assert log.log_end_offset == end
    data = data_of(log.read(0, 1 << 30)) if end else b""
    offsets = batch_offsets(data)
    assert (offsets[-1][1] + 1 if offsets else 0) == end
    info = append(log, batch(2))
    assert info.first_offset == end
    assert batch_offsets(data_of(log.read(end, 1 << 20))) == [(end, end + 1)]
    log.close()


def test_garbage_appended_to_the_active_segment_is_cut_off(tmp_path):
    log, segments = crashed_log(tmp_path)
    end = log.log_end_offset
    with open(segments[-1].log_path, "ab") as f:
        f.write(os.urandom(333))
    assert_serves_exactly(reopen(tmp_path), end)


def test_a_batch_torn_in_the_middle_is_dropped(tmp_path):
    log, segments = crashed_log(tmp_path)
    last = segments[-1]
    path = last.log_path
    size = path.stat().st_size
    os.truncate(path, size - 20)
    recovered = reopen(tmp_path)
    assert_serves_exactly(recovered, log.log_end_offset - 3)


def test_a_flipped_byte_under_the_crc_drops_the_last_batch(tmp_path):
    log, segments = crashed_log(tmp_path)
    path = segments[-1].log_path
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(size - 5)  # inside the last record's value
        byte = f.read(1)
        f.seek(size - 5)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert_serves_exactly(reopen(tmp_path), log.log_end_offset - 3)


def test_a_zero_filled_tail_like_preallocation_is_cut_off(tmp_path):
    log, segments = crashed_log(tmp_path)
    with open(segments[-1].log_path, "ab") as f:
        f.write(bytes(4096))
    recovered = reopen(tmp_path)
    assert tail_of(recovered).size == segments[-1].size
    assert_serves_exactly(recovered, log.log_end_offset)


def test_corruption_in_an_earlier_segment_deletes_the_later_ones(tmp_path):
    log, segments = crashed_log(tmp_path, batches=30)
    assert len(segments) >= 3
    victim = segments[1]
    with open(victim.log_path, "r+b") as f:
        f.seek(victim.size - 5)
        byte = f.read(1)
        f.seek(victim.size - 5)
        f.write(bytes([byte[0] ^ 0x01]))
    recovered = reopen(tmp_path)
    assert len(recovered.segments) == 2
    assert not segments[2].log_path.exists()
    assert_serves_exactly(recovered, victim.next_offset - 3)


def test_recovery_starts_at_the_segment_holding_the_recovery_point(tmp_path):
    log, segments = crashed_log(tmp_path, batches=30)
    # Corrupt a segment below the recovery point: it is trusted, not re-read.
    first = segments[0]
    with open(first.log_path, "r+b") as f:
        f.seek(first.size - 5)
        f.write(b"\x00")
    recovered = reopen(tmp_path, recovery_point=segments[-1].base_offset)
    assert recovered.segments[0].size == first.size
    assert recovered.log_end_offset == log.log_end_offset
    assert recovered.recovery_point == recovered.log_end_offset


@pytest.mark.parametrize("damage", ["delete", "tear", "garbage"])
def test_missing_or_corrupt_index_files_are_rebuilt(tmp_path, damage):
    log, segments = crashed_log(tmp_path, batches=30)
    sealed = segments[0]
    expected = list(zip(sealed.offset_index.keys, sealed.offset_index.values, strict=True))
    assert len(expected) > 2
    index_path = sealed.offset_index.path
    if damage == "delete":
        index_path.unlink()
        sealed.time_index.path.unlink()
    elif damage == "tear":
        os.truncate(index_path, index_path.stat().st_size - 3)
    else:  # whole entries, but pointing past the segment
        index_path.write_bytes(bytes.fromhex("00000001 7fffffff") * 3)
    recovered = reopen(tmp_path, recovery_point=log.log_end_offset)
    assert index_path.exists()
    # Reads through the rebuilt index work, and the index is the same as before.
    assert batch_offsets(data_of(recovered.read(4, 1 << 20)))[0] == (3, 5)
    rebuilt = recovered.segments[0].offset_index
    assert list(zip(rebuilt.keys, rebuilt.values, strict=True)) == expected
    assert index_path.stat().st_size == 8 * len(expected)
    assert_serves_exactly(recovered, log.log_end_offset)


def test_leftover_deleted_files_and_orphan_indexes_are_removed(tmp_path):
    log, _ = crashed_log(tmp_path)
    (tmp_path / "00000000000000000099.log.deleted").write_bytes(b"x")
    (tmp_path / "00000000000000000500.index").write_bytes(b"")
    reopen(tmp_path).close()
    assert not (tmp_path / "00000000000000000099.log.deleted").exists()
    assert not (tmp_path / "00000000000000000500.index").exists()


def test_clean_close_then_open_keeps_everything(tmp_path):
    log = Log.open(tmp_path, "t", 0, CONFIG)
    for i in range(25):
        append(log, batch(2, tag=i))
    before = data_of(log.read(0, 1 << 30))
    end = log.log_end_offset
    log.close()
    again = reopen(tmp_path, recovery_point=end)
    assert data_of(again.read(0, 1 << 30)) == before
    assert again.log_end_offset == end
    assert again.segments[0].max_timestamp == 1_001


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.integers(0, 10_000), junk=st.binary(max_size=200))
def test_any_torn_tail_recovers_to_the_last_whole_batch(tmp_path_factory, cut, junk):
    path = tmp_path_factory.mktemp("log")
    log, segments = crashed_log(path, batches=30)
    last = segments[-1]
    keep = cut % (last.size + 1)
    # The batches wholly inside the kept bytes survive; a whole batch in the junk cannot
    # (its CRC would have to match by chance).
    whole = [b for b in batch_offsets_of_file(last) if b[1] <= keep]
    os.truncate(last.log_path, keep)
    with open(last.log_path, "ab") as f:
        f.write(junk)
    expected_end = whole[-1][0] if whole else last.base_offset
    recovered = reopen(path)
    assert recovered.log_end_offset == expected_end
    if expected_end > 0:
        data = data_of(recovered.read(0, 1 << 30))
        assert batch_offsets(data)[-1][1] == expected_end - 1
    recovered.close()


def batch_offsets_of_file(segment: LogSegment) -> list[tuple[int, int]]:
    """(next offset, end position) of each batch of a closed segment, read from its file."""
    data = segment.log_path.read_bytes()
    return [(h.next_offset, pos + h.size) for pos, h in iter_batches(data)]
