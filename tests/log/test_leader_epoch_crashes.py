"""The leader-epoch file is written without fsyncs (broker/log/leader_epoch.py); after a
crash, whatever version of it survives next to whatever batches survive, reopening the
log gives exactly the epochs its batches carry (docs/contracts/log.md, "Leader epochs").

A crash is simulated as the tests of the durability costs do: files put back as a power
failure can leave them. The epoch file is written in batches after the changes (by the
log manager's ticks), so it can come back as its last synced version, any
version the cache held after it (whichever a batch happened to write), or not at all;
the segments as they were at the last flush or at any later step. A process crash is
the log manager abandoned without a close: every file as last written."""

from __future__ import annotations

import shutil

import pytest

from broker.log import Log, LogConfig
from broker.log import leader_epoch as leader_epoch_module
from broker.log.checkpoint import LEADER_EPOCH_FILE
from broker.log.manager import LogManager
from broker.records.batch import build_batch, iter_batches
from tests.helpers.log_batches import append, batch, data_of, produced

SEGMENT_BYTES = 300  # a few batches per segment: recovery re-reads only the last ones


class EpochFileVersions:
    """Every version of the epoch file written, and the one a power failure keeps for sure
    (the content at its last fsync)."""

    def __init__(self, monkeypatch) -> None:
        self.written: list[str] = []
        self.synced: str | None = None
        real_write, real_sync = (
            leader_epoch_module.write_entry_lines,
            leader_epoch_module.fsync_file,
        )

        def write(path, lines, durable=True):
            real_write(path, lines, durable=durable)
            text = path.read_text()
            self.written.append(text)
            if durable:
                self.synced, self.written = text, []

        def sync(path, *how):
            real_sync(path, *how)
            self.synced, self.written = path.read_text(), []

        monkeypatch.setattr(leader_epoch_module, "write_entry_lines", write)
        monkeypatch.setattr(leader_epoch_module, "fsync_file", sync)

    def after_a_power_failure(self) -> list[str | None]:
        return [self.synced, *self.written]


def file_text(entries) -> str:
    """The epoch file holding `entries`, in Kafka's format."""
    return "".join(f"{line}\n" for line in ["0", len(entries), *(f"{e} {s}" for e, s in entries)])


def files_of(directory) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.name != LEADER_EPOCH_FILE}


def put_back(directory, segments: dict[str, bytes], epoch_file: str | None) -> None:
    shutil.rmtree(directory)
    directory.mkdir()
    for name, data in segments.items():
        (directory / name).write_bytes(data)
    if epoch_file is not None:
        (directory / LEADER_EPOCH_FILE).write_text(epoch_file)


def batch_epochs(log: Log) -> list[tuple[int, int]]:
    """(partitionLeaderEpoch, base offset) of every batch the log holds, oldest first."""
    data = data_of(log.read(log.log_start_offset, 1 << 30))
    return [(h.partition_leader_epoch, h.base_offset) for _, h in iter_batches(data)]


def derived(batches: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The entries the batches give: each epoch from its first batch on."""
    entries: list[tuple[int, int]] = []
    for epoch, base in batches:
        if epoch >= 0 and (not entries or epoch > entries[-1][0]):
            entries.append((epoch, base))
    return entries


def parsed(epoch_file: str | None) -> list[tuple[int, int]]:
    if epoch_file is None:
        return []
    return [tuple(map(int, line.split())) for line in epoch_file.splitlines()[2:]]


def follower_batch(base_offset: int, epoch: int) -> bytes:
    return build_batch(
        [(None, b"f", 1_000, [])], base_offset=base_offset, partition_leader_epoch=epoch
    )


def test_any_epoch_file_version_next_to_any_surviving_log_is_repaired_exactly(
    tmp_path, monkeypatch
):
    versions = EpochFileVersions(monkeypatch)
    directory = tmp_path / "t-0"
    log = Log.open(directory, "t", 0, LogConfig(segment_bytes=SEGMENT_BYTES))
    for _ in range(4):
        append(log, batch(2), epoch=1)
    log.flush()
    recovery_point = log.recovery_point  # what the recovery-point checkpoint holds
    surviving = [files_of(directory)]
    # Every version the cache holds after a change: the one a deferred batch may write.
    held = [file_text(log.leader_epochs.entries)]

    def changed() -> None:
        held.append(file_text(log.leader_epochs.entries))

    # Failovers: epoch 3 leads here and appends; as a follower this replica then cuts
    # all of it (its leader never had it); epoch 4 leads and appends nothing; epoch 6's
    # leader is copied, then this replica leads epoch 7 at the log end.
    epoch_3_start = log.log_end_offset
    log.leader_epochs.assign(3, epoch_3_start)
    changed()
    surviving.append(files_of(directory))
    append(log, batch(2), epoch=3)
    append(log, batch(1), epoch=3)
    surviving.append(files_of(directory))
    log.leader_epochs.write()  # one batch of the log manager's, between two changes
    log.truncate_to(epoch_3_start)
    changed()
    log.leader_epochs.assign(4, log.log_end_offset)
    changed()
    surviving.append(files_of(directory))
    log.append_as_follower(*produced(follower_batch(log.log_end_offset, 6)))
    changed()
    log.leader_epochs.assign(7, log.log_end_offset)
    changed()
    surviving.append(files_of(directory))
    assert len(versions.written) == 1  # no change wrote the file; the one batch did
    candidates = [*versions.after_a_power_failure(), *held, None]
    log.close()

    for segments in surviving:
        for epoch_file in candidates:
            put_back(directory, segments, epoch_file)
            again = Log.open(
                directory, "t", 0, LogConfig(segment_bytes=SEGMENT_BYTES), recovery_point
            )
            expected = derived(batch_epochs(again))
            # An epoch that led at the log end but appended nothing left stays when the
            # surviving file still names it (module doc: nothing carries it).
            at_end = [
                e
                for e in parsed(epoch_file)
                if e[1] == again.log_end_offset and (not expected or e[0] > expected[-1][0])
            ]
            entries = [tuple(e) for e in again.leader_epochs.entries]
            assert entries == expected + at_end, (segments.keys(), epoch_file)
            again.leader_epochs.write()  # a cut at open waits for the next batch too
            assert parsed((directory / LEADER_EPOCH_FILE).read_text()) == entries
            again.close()


def test_epochs_below_the_recovery_point_are_synced_before_it_moves(tmp_path, monkeypatch):
    """The batches below the recovery point are not re-read at open: after a flush the
    synced version of the file must hold their epochs."""
    versions = EpochFileVersions(monkeypatch)
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig(segment_bytes=SEGMENT_BYTES))
    for epoch in (1, 1, 3, 3, 5, 5, 5, 8):
        new = epoch > log.leader_epochs.latest_epoch()
        if new:
            log.leader_epochs.assign(epoch, log.log_end_offset)  # make_leader: no write
        append(log, batch(2), epoch=epoch)
        assert versions.written == []  # written by a later batch or the flush
        assert log.leader_epochs.dirty == new
        log.flush()
        assert versions.written == []
        assert parsed(versions.synced) == derived(batch_epochs(log))


def test_an_epoch_file_contradicting_the_batches_is_rebuilt_from_all_of_them(tmp_path, caplog):
    directory = tmp_path / "t-0"
    log = Log.open(directory, "t", 0, LogConfig(segment_bytes=SEGMENT_BYTES))
    for epoch in (1, 1, 1, 4, 4, 4):
        append(log, batch(2), epoch=epoch)
    recovery_point = log.log_end_offset - 2
    assert log.active_segment.base_offset == 6  # recovery re-reads from offset 6
    log.close()
    # Epoch 9 below the re-read segments, where batches of epoch 4 follow.
    (directory / LEADER_EPOCH_FILE).write_text("0\n2\n1 0\n9 2\n")
    again = Log.open(directory, "t", 0, LogConfig(segment_bytes=SEGMENT_BYTES), recovery_point)
    assert "contradict" in caplog.text
    assert again.leader_epochs.entries == [(1, 0), (4, 6)]


@pytest.mark.parametrize("epoch_file", ["0\n1\n1 0\n", None])
def test_a_restart_after_the_process_died_syncs_the_epochs_it_keeps(
    tmp_path, monkeypatch, epoch_file
):
    """After a process crash the file read may exist only in the page cache; the
    recovery point moves to the log end at open, so the epochs are synced then."""
    directory = tmp_path / "t-0"
    log = Log.open(directory, "t", 0, LogConfig())
    append(log, batch(2), epoch=1)
    log.leader_epochs.assign(2, log.log_end_offset)
    append(log, batch(2), epoch=2)
    segments = files_of(directory)
    put_back(directory, segments, epoch_file)
    versions = EpochFileVersions(monkeypatch)
    again = Log.open(directory, "t", 0, LogConfig(), recovery_point=0)
    assert again.recovery_point == again.log_end_offset == 4
    assert parsed(versions.synced) == [(1, 0), (2, 2)]
    assert versions.written == []


def test_a_crash_before_the_deferred_write_recovers_the_same_epochs(tmp_path, monkeypatch):
    """Leadership changes on many partitions write no epoch file (the log manager writes
    them later, in slices, from its ticks); a process that dies before that write
    leaves the old files, and reopening gives back every epoch the batches carry.
    An epoch that led but appended nothing is the one thing such a crash loses (as a
    power failure can, docs/contracts/log.md): the controller brings it back."""
    versions = EpochFileVersions(monkeypatch)
    config = LogConfig(segment_bytes=SEGMENT_BYTES)
    manager = LogManager([tmp_path], config)
    logs = [manager.create("t", p) for p in range(6)]
    for each in logs:
        each.leader_epochs.assign(0, 0)
        append(each, batch(2), epoch=0)
    manager.tick()
    assert manager.epoch_files_written == 6 and len(versions.written) == 6
    for each in logs:
        each.flush()
    manager.tick()
    assert manager.epoch_files_written == 6, "a flush wrote them; nothing left to write"
    # A failover: every partition gets a new epoch at its log end (make_leader); half of
    # them append in it, one appends in a third epoch too.
    for p, each in enumerate(logs):
        each.leader_epochs.assign(5, each.log_end_offset)
        if p % 2:
            append(each, batch(2), epoch=5)
    logs[1].leader_epochs.assign(6, logs[1].log_end_offset)
    append(logs[1], batch(1), epoch=6)
    assert versions.written == [], "no epoch file written by the leadership changes"
    before = {p: each.leader_epochs.entries for p, each in enumerate(logs)}
    # The process dies here: no close, no tick; every file as last written.
    again = LogManager([tmp_path], config)
    again.load()
    for p, entries in before.items():
        recovered = again.get("t", p).leader_epochs.entries
        if p % 2:
            assert recovered == entries, p
        else:  # epoch 5 appended nothing: the file written before it is what is left
            assert recovered == entries[:-1] == [(0, 0)], p
    # The same failover, then the batch: every file written once, and nothing lost.
    written = again.epoch_files_written
    for each in again.logs():
        each.leader_epochs.assign(9, each.log_end_offset)
    expected = {each.partition: each.leader_epochs.entries for each in again.logs()}
    assert again.write_leader_epochs() == 6
    assert again.epoch_files_written - written == 6
    again.tick()
    assert again.epoch_files_written - written == 6, "unchanged files are not rewritten"
    third = LogManager([tmp_path], config)
    third.load()
    assert {each.partition: each.leader_epochs.entries for each in third.logs()} == expected
    third.close()
