"""The log keeps its leader epochs in step: appends as leader and as follower, truncation,
retention, recovery of a torn tail, and the checkpoint file across reopening."""

from __future__ import annotations

import logging
import os

import pytest

from broker.log import Log, LogConfig
from broker.log.checkpoint import LEADER_EPOCH_FILE
from broker.records.batch import build_batch, iter_batches
from tests.helpers.clock import Clock
from tests.helpers.log_batches import append, batch, data_of, open_log, produced


def epoch_file(log: Log) -> str:
    """The file once the pending changes are written (the log manager batches them)."""
    log.leader_epochs.write()
    return (log.dir / LEADER_EPOCH_FILE).read_text()


def leader_batch(base_offset: int, epoch: int, count: int = 2) -> bytes:
    """A batch as a leader wrote it: offsets and partitionLeaderEpoch set."""
    records = [(None, b"v%d" % (base_offset + i), 1_000 + i, []) for i in range(count)]
    return build_batch(records, base_offset=base_offset, partition_leader_epoch=epoch)


def stored_epochs(log: Log) -> list[tuple[int, int]]:
    """(base offset, partitionLeaderEpoch) of every batch the log holds."""
    data = data_of(log.read(log.log_start_offset, 1 << 30))
    return [(h.base_offset, h.partition_leader_epoch) for _, h in iter_batches(data)]


def test_an_empty_log_has_no_epoch_and_no_file(tmp_path):
    log = open_log(tmp_path)
    assert log.leader_epochs.latest_epoch() == -1
    assert not (log.dir / LEADER_EPOCH_FILE).exists()


def test_append_records_the_epoch_when_it_is_new(tmp_path):
    log = open_log(tmp_path)
    append(log, batch(3), epoch=0)
    assert epoch_file(log) == "0\n1\n0 0\n"
    append(log, batch(2), epoch=0)
    append(log, batch(2), epoch=4)
    append(log, batch(1), epoch=4)
    assert log.leader_epochs.entries == [(0, 0), (4, 5)]
    assert epoch_file(log) == "0\n2\n0 0\n4 5\n"
    assert stored_epochs(log) == [(0, 0), (3, 0), (5, 4), (7, 4)]


def test_append_as_follower_takes_the_epochs_of_the_leaders_batches(tmp_path):
    log = open_log(tmp_path)
    log.append_as_follower(*produced(leader_batch(0, 1), leader_batch(2, 1), leader_batch(4, 3)))
    log.append_as_follower(*produced(leader_batch(6, 3), leader_batch(8, 7)))
    assert log.leader_epochs.entries == [(1, 0), (3, 4), (7, 8)]
    assert epoch_file(log) == "0\n3\n1 0\n3 4\n7 8\n"
    assert stored_epochs(log) == [(0, 1), (2, 1), (4, 3), (6, 3), (8, 7)]


def test_truncate_to_drops_the_epochs_of_the_removed_tail(tmp_path):
    log = open_log(tmp_path, segment_bytes=300, file_delete_delay_ms=0)
    for epoch in (0, 0, 2, 2, 5, 5):
        append(log, batch(2), epoch=epoch)
    assert log.leader_epochs.entries == [(0, 0), (2, 4), (5, 8)]
    log.truncate_to(9)  # inside the first batch of epoch 5: the whole batch goes
    assert log.log_end_offset == 8
    assert log.leader_epochs.entries == [(0, 0), (2, 4)]
    assert epoch_file(log) == "0\n2\n0 0\n2 4\n"
    # The follower then appends its new leader's batches.
    log.append_as_follower(*produced(leader_batch(8, 6)))
    assert log.leader_epochs.entries == [(0, 0), (2, 4), (6, 8)]


def test_truncate_to_the_log_end_drops_an_epoch_that_appended_nothing(tmp_path):
    log = open_log(tmp_path)
    append(log, batch(2), epoch=0)
    log.leader_epochs.assign(3, 2)  # led in epoch 3, appended nothing
    log.truncate_to(2)
    assert log.leader_epochs.entries == [(0, 0)]


def test_truncate_below_the_log_start_forgets_every_epoch(tmp_path):
    clock = Clock(100_000)
    log = open_log(tmp_path, clock, segment_bytes=300, retention_ms=1_000, file_delete_delay_ms=0)
    for epoch in (0, 0, 1, 1, 1):
        append(log, batch(2, timestamp=1_000), epoch=epoch)
    log.delete_expired(clock.now, high_watermark=6)
    assert log.log_start_offset == 6
    log.truncate_to(2)
    assert log.leader_epochs.entries == []
    assert epoch_file(log) == "0\n0\n"


def test_retention_moves_the_first_epoch_to_the_new_log_start(tmp_path):
    clock = Clock(100_000)
    one = batch(1, value_size=50)
    log = open_log(tmp_path, clock, segment_bytes=len(one) * 2, retention_ms=1_000)
    for i, epoch in enumerate((0, 0, 0, 1, 1, 2)):
        append(log, batch(1, value_size=50, timestamp=1_000 if i < 4 else clock.now), epoch=epoch)
    assert log.leader_epochs.entries == [(0, 0), (1, 3), (2, 5)]
    assert log.delete_expired(clock.now) == 2
    assert log.log_start_offset == 4
    assert log.leader_epochs.entries == [(1, 4), (2, 5)]
    assert epoch_file(log) == "0\n2\n1 4\n2 5\n"


def test_retention_of_everything_keeps_the_latest_epoch(tmp_path):
    clock = Clock(100_000)
    log = open_log(tmp_path, clock, segment_bytes=300, retention_ms=1_000)
    for epoch in (0, 3, 3):
        append(log, batch(2, timestamp=1_000), epoch=epoch)
    log.delete_expired(clock.now)
    assert log.log_start_offset == log.log_end_offset == 6
    assert log.leader_epochs.entries == [(3, 6)]
    log.close()
    assert open_log(tmp_path).leader_epochs.latest_epoch() == 3


def test_reopening_reads_the_file(tmp_path):
    log = open_log(tmp_path)
    append(log, batch(2), epoch=1)
    append(log, batch(2), epoch=4)
    log.close()
    again = open_log(tmp_path)
    assert again.leader_epochs.entries == [(1, 0), (4, 2)]
    assert again.leader_epochs.end_offset_for(1, again.log_end_offset) == (1, 2)
    assert again.leader_epochs.end_offset_for(4, again.log_end_offset) == (4, 4)


def test_recovery_cutting_a_torn_tail_drops_its_epochs(tmp_path):
    log = open_log(tmp_path)
    for epoch in (0, 1, 2, 3):
        append(log, batch(2), epoch=epoch)
    segment = log.active_segment
    log.flush()
    positions = [p for p, _ in iter_batches(data_of(log.read(0, 1 << 30)))]
    os.truncate(segment.log_path, positions[2] + 30)  # epoch 2's batch is torn
    assert epoch_file(log).endswith("2 4\n3 6\n")
    again = open_log(tmp_path)  # recovery point 0: the whole segment is checked
    assert again.log_end_offset == 4
    # Epoch 3 started beyond the recovered end: gone. Epoch 2 starts right at it and
    # stays, so the partition does not go back to an older epoch.
    assert again.leader_epochs.entries == [(0, 0), (1, 2), (2, 4)]
    assert epoch_file(again) == "0\n3\n0 0\n1 2\n2 4\n"
    assert again.leader_epochs.end_offset_for(1, again.log_end_offset) == (1, 4)


@pytest.mark.parametrize(
    ("damage", "logged"),
    [
        ("corrupt", "malformed"),  # reported as an error
        ("missing", ""),  # a log written before the file existed
    ],
)
def test_a_corrupt_or_missing_file_is_rebuilt_from_the_batches(tmp_path, caplog, damage, logged):
    log = open_log(tmp_path, segment_bytes=300)
    for epoch in (0, 0, 2, 2, 2, 7):
        append(log, batch(2), epoch=epoch)
    assert len(log.segments) > 1
    log.close()
    path = tmp_path / "t-0" / LEADER_EPOCH_FILE
    if damage == "corrupt":
        path.write_text("0\n2\n0 0\ngarbage\n")
    else:
        path.unlink()
    with caplog.at_level(logging.ERROR):
        again = open_log(tmp_path)
    assert logged in caplog.text
    assert again.leader_epochs.entries == [(0, 0), (2, 4), (7, 10)]
    assert epoch_file(again) == "0\n3\n0 0\n2 4\n7 10\n"


def test_a_stale_file_is_cut_to_the_log_start_and_end(tmp_path):
    """A crash between deleting segments, or truncating, and saving the file."""
    log = open_log(tmp_path)
    append(log, batch(4), epoch=1)
    append(log, batch(4), epoch=2)
    log.close()
    (tmp_path / "t-0" / LEADER_EPOCH_FILE).write_text("0\n4\n1 0\n2 4\n3 9\n5 12\n")
    # Recovery point at the log end (a clean stop): no batch is re-read.
    again = Log.open(tmp_path / "t-0", "t", 0, LogConfig(), recovery_point=8, log_start_offset=2)
    assert again.log_start_offset == 2
    assert again.leader_epochs.entries == [(1, 2), (2, 4)]


def test_a_full_truncation_forgets_every_epoch(tmp_path):
    """A follower whose log ends below its leader's log start starts over there."""
    log = open_log(tmp_path)
    append(log, batch(3), epoch=2)
    append(log, batch(2), epoch=4)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert log.leader_epochs.latest_epoch() == -1
    leader_batch = build_batch([(None, b"x", 1, [])], base_offset=100, partition_leader_epoch=5)
    log.append_as_follower(*produced(leader_batch))
    assert [(e.epoch, e.start_offset) for e in log.leader_epochs.entries] == [(5, 100)]
    log.close()
