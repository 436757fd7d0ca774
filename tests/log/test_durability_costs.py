"""What creating, flushing, restarting and checkpointing cost in disk syncs, counted
(os.fsync monkeypatched), and that the syncs left out lose nothing a restart or a power
failure can't rebuild (docs/contracts/log.md, "Layout on disk")."""

from __future__ import annotations

import os

import pytest

from broker.log import LogConfig, LogManager
from broker.log.checkpoint import LEADER_EPOCH_FILE
from broker.server.partition import Leadership, Partition
from tests.helpers.log_batches import append, batch, batch_offsets, data_of

N = 50


@pytest.fixture
def fsyncs(monkeypatch):
    """Every os.fsync (file or directory) made while the test runs."""
    made = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (made.append(fd), real(fd))[1])
    return made


@pytest.fixture
def writes(monkeypatch):
    """Every file replaced by a rename (checkpoints and leader-epoch files)."""
    made = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (made.append(str(b)), real(a, b))[1])
    return made


def loaded(dirs) -> LogManager:
    m = LogManager(dirs, LogConfig())
    m.load()
    return m


def create_leaders(m: LogManager, count: int, epoch: int = 3) -> None:
    """One LeaderAndIsr's worth: create each log and record its leader's first epoch."""
    for p in range(count):
        m.create("t", p).leader_epochs.assign(epoch, 0)


def written_leaders(m: LogManager, count: int) -> None:
    """`create_leaders`, then two records appended to each log by that epoch."""
    create_leaders(m, count)
    for p in range(count):
        append(m.get("t", p), batch(2), epoch=3)


def one_written_leader(tmp_path, epoch: int):
    """The log t-0, just created, its leader at `epoch`, two records appended."""
    m = loaded([tmp_path])
    create_leaders(m, 1, epoch=epoch)
    log = m.get("t", 0)
    append(log, batch(2), epoch=epoch)
    m.write_leader_epochs()
    return log


def test_creating_a_batch_of_logs_syncs_nothing(tmp_path, fsyncs):
    m = loaded([tmp_path / "a", tmp_path / "b"])
    fsyncs.clear()
    create_leaders(m, N)
    assert not any((log.dir / LEADER_EPOCH_FILE).exists() for log in m.logs())
    assert m.write_leader_epochs() == N  # what the ticks write after it
    assert fsyncs == []
    assert {log.dir.parent.name for log in m.logs()} == {"a", "b"}
    assert all((log.dir / LEADER_EPOCH_FILE).exists() for log in m.logs())
    # One file per partition: the index files come with their first entry or a roll.
    assert all(len(os.listdir(log.dir)) == 2 for log in m.logs())


def test_a_rolled_segment_has_its_index_files(tmp_path):
    m = loaded([tmp_path])
    log = m.create("t", 0)
    append(log, batch(2))
    log.roll()
    m.write_leader_epochs()
    assert sorted(os.listdir(log.dir)) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "00000000000000000002.log",
        "leader-epoch-checkpoint",
    ]
    m.close()
    again = loaded([tmp_path])  # the sealed segment is trusted: nothing rebuilt
    assert batch_offsets(data_of(again.get("t", 0).read(0, 1 << 20))) == [(0, 1)]


def test_the_first_flush_syncs_each_log_dir_once_for_all_its_new_logs(tmp_path, fsyncs):
    m = loaded([tmp_path])
    written_leaders(m, N)
    fsyncs.clear()
    for each in m.logs():
        each.flush()
    # Per log: its .log file, its leader-epoch file (written without a sync at the
    # epoch's assignment) and its directory; the log dir once for all of them.
    assert len(fsyncs) == 3 * N + 1
    fsyncs.clear()
    append(m.get("t", 0), batch(1), epoch=3)
    m.get("t", 0).flush()
    assert len(fsyncs) == 1  # the .log only: the directories are durable now


def test_a_restart_after_a_clean_stop_syncs_nothing(tmp_path, fsyncs):
    m = loaded([tmp_path])
    written_leaders(m, N)
    m.close()
    fsyncs.clear()
    again = loaded([tmp_path])
    assert fsyncs == []
    assert all(log.log_end_offset == 2 and log.recovery_point == 2 for log in again.logs())
    assert again.get("t", 7).leader_epochs.entries == [(3, 0)]


def test_data_above_the_recovery_point_is_synced_at_restart(tmp_path, fsyncs):
    m = loaded([tmp_path])
    create_leaders(m, 2)
    append(m.get("t", 0), batch(2), epoch=3)
    # The process dies: nothing flushed, the recovery point is 0.
    fsyncs.clear()
    again = loaded([tmp_path])
    assert again.get("t", 0).recovery_point == 2
    assert fsyncs, "recovered data must be fsynced before the recovery point covers it"


@pytest.mark.parametrize("lost", ["missing", "empty", "garbage"])
def test_an_epoch_file_lost_in_a_power_failure_is_rebuilt(tmp_path, lost):
    log = one_written_leader(tmp_path, epoch=4)
    path = log.dir / LEADER_EPOCH_FILE
    if lost == "missing":
        path.unlink()
    else:
        path.write_bytes(b"" if lost == "empty" else b"\x00" * 16)
    again = loaded([tmp_path])
    assert again.get("t", 0).leader_epochs.entries == [(4, 0)]
    assert batch_offsets(data_of(again.get("t", 0).read(0, 1 << 20))) == [(0, 1)]


def test_new_epochs_are_not_synced_until_a_flush(tmp_path, fsyncs):
    log = one_written_leader(tmp_path, epoch=4)
    log.flush()
    fsyncs.clear()
    log.leader_epochs.assign(5, log.log_end_offset)
    append(log, batch(1), epoch=5)
    assert fsyncs == []
    log.flush()
    # The .log, the epoch file and the directory (its rename), before the recovery point
    # covers epoch 5's batch.
    assert len(fsyncs) == 3
    fsyncs.clear()
    append(log, batch(1), epoch=5)
    log.flush()
    assert len(fsyncs) == 1  # no new epoch: the .log only


def test_a_new_log_that_never_flushed_is_there_after_a_restart(tmp_path):
    m = loaded([tmp_path])
    create_leaders(m, 3)
    append(m.get("t", 1), batch(2), epoch=3)
    # No close: the process dies; the page cache keeps what was written.
    again = loaded([tmp_path])
    assert sorted(log.partition for log in again.logs()) == [0, 1, 2]
    assert again.get("t", 1).log_end_offset == 2
    assert again.get("t", 1).leader_epochs.entries == [(3, 0)]  # replayed from its batch
    # Epoch 3 appended nothing to t-2 and died before the batch that writes the epoch
    # files: lost, as docs/contracts/log.md says (the controller brings it back).
    assert again.get("t", 2).leader_epochs.entries == []


def test_unchanged_checkpoints_are_not_rewritten(tmp_path, fsyncs, writes):
    m = loaded([tmp_path])
    create_leaders(m, N)
    m.write_leader_epochs()
    hws = {("t", p): 0 for p in range(N)}
    m.checkpoint(hws)
    fsyncs.clear()
    writes.clear()
    for _ in range(3):  # idle ticks
        m.tick()
        m.checkpoint(hws)
    assert writes == [] and fsyncs == []
    append(m.get("t", 1), batch(2), epoch=3)
    m.checkpoint({**hws, ("t", 1): 2})
    assert [os.path.basename(w) for w in writes] == ["replication-offset-checkpoint"]


def test_a_restart_does_not_rewrite_checkpoints_that_hold_what_it_found(tmp_path, writes):
    m = loaded([tmp_path])
    create_leaders(m, 3)
    m.close({("t", p): 0 for p in range(3)})
    writes.clear()
    loaded([tmp_path])
    assert writes == []


def test_a_failover_to_n_partitions_syncs_nothing(tmp_path, fsyncs, writes):
    """Issue 23: a failover of N partitions costs no disk sync and writes no file while
    the LeaderAndIsr is handled; the log manager's next batch writes each epoch file
    once (one rename per partition, no sync) and the next flush of each log syncs it."""
    m = loaded([tmp_path])
    written_leaders(m, N)
    for each in m.logs():
        each.flush()
    partitions = [Partition(m.get("t", p), broker_id=1) for p in range(N)]
    fsyncs.clear()
    writes.clear()
    for partition in partitions:
        partition.make_leader(Leadership(1, 4, (1, 2), (1, 2, 3)), now_ms=0)
    assert fsyncs == [] and writes == []
    assert all(p.log.leader_epochs.entries == [(3, 0), (4, 2)] for p in partitions)
    assert m.leader_epoch_files_pending == N  # the gauge of the same name
    assert m.write_leader_epochs(budget_s=0) == 1  # a tick's slice: at least one
    assert m.leader_epoch_files_pending == N - 1
    assert m.write_leader_epochs() == N - 1
    assert m.write_leader_epochs() == 0
    assert m.leader_epoch_files_pending == 0
    assert fsyncs == [] and len(writes) == N
    append(m.get("t", 0), batch(1), epoch=4)
    m.get("t", 0).flush()
    assert len(fsyncs) == 3  # the .log, the epoch file, the directory
