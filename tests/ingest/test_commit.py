"""The commit protocol, the run lock and history, on every filesystem implementation."""

from __future__ import annotations

import threading

import pytest

from ingest import layout
from ingest.commit import (
    CommitError,
    LockHeld,
    LockLost,
    RunLock,
    commit,
    last_committed_manifest,
    list_runs,
    load_manifest,
    recover,
    rerun_target,
)
from ingest.fs import LocalFileSystem
from ingest.manifest import Manifest
from tests.helpers.commit_runs import HOURS, R1, R2, R3, stage_run, tree


def test_commit_makes_files_and_offsets_visible_together(fs):
    manifest, moves = stage_run(fs, R1)
    staged = {final: fs.read_bytes(staged) for staged, final in moves}
    commit(fs, manifest, moves)
    files = tree(fs)
    assert {p: b for p, b in files.items() if not p.startswith("history/")} == staged
    assert not fs.exists(layout.run_dir(R1))
    assert list_runs(fs) == [R1]
    assert load_manifest(fs, R1) == manifest
    assert last_committed_manifest(fs) == manifest
    assert last_committed_manifest(fs).next_offsets() == {("clicks", 0): 10, ("clicks", 1): 9}


def test_commit_refuses_a_second_commit_of_the_same_run(fs):
    manifest, moves = stage_run(fs, R1)
    commit(fs, manifest, moves)
    with pytest.raises(CommitError, match="already committed"):
        commit(fs, manifest, moves)


@pytest.mark.parametrize(
    "spoil, message",
    [
        (lambda fs, m, mv: fs.delete(mv[0][0]), "staged file missing"),
        (lambda fs, m, mv: mv.pop(), "no move puts it there"),
        (lambda fs, m, mv: setattr(m.partitions[0], "loaded", 99), "next - first"),
        (lambda fs, m, mv: mv.append(("elsewhere/x", "data/clicks/x")), "outside"),
        (lambda fs, m, mv: mv.append((mv[0][0], mv[0][1])), "share a final path"),
        (lambda fs, m, mv: setattr(m, "kind", "rerun"), "names the run it replaces"),
    ],
)
def test_a_bad_commit_changes_nothing_visible(make_fs, spoil, message):
    fs = make_fs("local")
    manifest, moves = stage_run(fs, R1)
    spoil(fs, manifest, moves)
    before = tree(fs)
    with pytest.raises(CommitError, match=message):
        commit(fs, manifest, moves)
    assert tree(fs) == before
    assert not fs.exists(layout.intent_file(R1))
    recover(fs)
    assert tree(fs) == {}  # only staging existed, and it is discarded


def test_a_load_cannot_delete_files(make_fs):
    fs = make_fs("local")
    manifest, moves = stage_run(fs, R1)
    with pytest.raises(CommitError, match="only a rerun"):
        commit(fs, manifest, moves, replaces=["data/clicks/old.parquet"])


def test_recover_discards_uncommitted_staging_and_keeps_history(fs):
    manifest, moves = stage_run(fs, R1)
    commit(fs, manifest, moves)
    committed = tree(fs)
    stage_run(fs, R2, ranges=((0, 10, 20),))
    fs.write_bytes(f"{layout.driver_tmp_dir(R2)}/intent.0badc0de", b'{"torn')
    report = recover(fs)
    assert report.discarded == [R2] and report.rolled_forward == []
    assert tree(fs) == committed
    assert last_committed_manifest(fs).run_id == R1


def test_rerun_replaces_the_files_of_a_run_under_the_same_protocol(fs):
    load, moves = stage_run(fs, R1)
    commit(fs, load, moves)
    old_files = set(load.files())
    for hour in HOURS:
        fs.write_bytes(layout.success_marker("clicks", hour), b"")
    target, replaces = rerun_target(fs, R1)
    assert target == load
    assert set(replaces) == old_files | {layout.success_marker("clicks", h) for h in HOURS}

    rerun, moves = stage_run(fs, R2, kind="rerun", replaces=R1, tag=b"+fixed")
    commit(fs, rerun, moves, replaces=replaces)
    after = tree(fs)
    assert not old_files & set(after)
    assert not any(p.endswith("_SUCCESS") for p in after)  # the audit marks them again
    assert set(rerun.files()) <= set(after)
    assert all(after[p].endswith(b"+fixed") for p in rerun.files())
    assert load_manifest(fs, R2).replaces == R1
    # The planner's offsets come from the newest *load*; the ranges are equal anyway.
    assert last_committed_manifest(fs, kind="load").run_id == R1
    assert last_committed_manifest(fs).run_id == R2
    assert last_committed_manifest(fs).next_offsets() == load.next_offsets()

    # Rerunning R1 again means replacing R2, which now holds R1's ranges.
    target, replaces = rerun_target(fs, R1)
    assert target.run_id == R2 and set(rerun.files()) <= set(replaces)
    stale, moves = stage_run(fs, R3, kind="rerun", replaces=R1)
    with pytest.raises(CommitError, match="already replaced by"):
        commit(fs, stale, moves, replaces=replaces)
    again, moves = stage_run(fs, R3, kind="rerun", replaces=R2, tag=b"+fixed")
    commit(fs, again, moves, replaces=replaces)
    final = tree(fs)
    data = sorted(b for p, b in final.items() if p.startswith("data/"))
    assert data == sorted(b for p, b in after.items() if p.startswith("data/"))
    assert not any(R2 in p for p in final if not p.startswith("history/"))


def test_rerun_must_cover_the_same_ranges(make_fs):
    fs = make_fs("local")
    load, moves = stage_run(fs, R1)
    commit(fs, load, moves)
    rerun, moves = stage_run(fs, R2, kind="rerun", replaces=R1, ranges=((0, 0, 8),))
    with pytest.raises(CommitError, match="exactly the ranges"):
        commit(fs, rerun, moves, replaces=rerun_target(fs, R1)[1])
    missing, moves = stage_run(fs, R3, kind="rerun", replaces=R2)
    with pytest.raises(CommitError, match="not a committed run"):
        commit(fs, missing, moves)


def test_roll_forward_refuses_a_foreign_file_at_a_final_path(make_fs):
    fs = make_fs("local")
    manifest, moves = stage_run(fs, R1)
    fs.write_bytes(moves[0][1], b"something else entirely, of another size")
    with pytest.raises(CommitError, match="is not the file this run staged"):
        commit(fs, manifest, moves)
    # The run is committed (the intent exists) but cannot finish: recovery keeps refusing
    # rather than overwriting, and keeps the intent for the operator.
    with pytest.raises(CommitError):
        recover(fs)
    assert fs.exists(layout.intent_file(R1))


# ---------------------------------------------------------------------------- the lock


class Clock:
    def __init__(self, now=1_000_000.0):
        self.now = now

    def __call__(self):
        return self.now


def test_two_drivers_cannot_both_hold_the_lock(fs):
    a = RunLock(fs, owner="driver-a").acquire()
    b = RunLock(fs, owner="driver-b")
    with pytest.raises(LockHeld, match="driver-a"):
        b.acquire()
    a.check()
    assert a.release()
    b.acquire()
    with pytest.raises(LockHeld, match="driver-b"):
        RunLock(fs, owner="driver-a").acquire()
    assert RunLock(fs).holder()["owner"] == "driver-b"


def test_lock_race_has_exactly_one_winner(make_fs):
    fs = make_fs("local")
    stale = RunLock(fs, owner="dead", ttl_s=1, clock=Clock(0)).acquire()
    assert stale.generation == 1
    winners, barrier = [], threading.Barrier(8)

    def contend(i):
        lock = RunLock(fs, owner=f"driver-{i}")
        barrier.wait()
        try:
            lock.acquire()
            winners.append(lock)
        except LockHeld:
            pass

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Every contender found the dead driver's lock stale; the rename let exactly one win.
    assert len(winners) == 1
    winners[0].check()
    with pytest.raises(LockLost):
        stale.check()


def test_stale_lock_is_broken_after_ttl_and_heartbeats_keep_it(make_fs):
    fs = make_fs("local")
    clock = Clock()
    a = RunLock(fs, owner="a", ttl_s=900, clock=clock).acquire()
    clock.now += 800
    a.heartbeat()
    clock.now += 800  # 1600s after acquiring, 800s after the heartbeat: still alive
    with pytest.raises(LockHeld):
        RunLock(fs, owner="b", clock=clock).acquire()
    clock.now += 200
    b = RunLock(fs, owner="b", clock=clock).acquire()
    with pytest.raises(LockLost):
        a.check()
    with pytest.raises(LockLost):
        a.heartbeat()
    assert a.release() is False  # it was not a's to release
    b.check()
    forced = RunLock(fs, owner="operator", clock=clock).acquire(force=True)
    forced.check()
    with pytest.raises(LockLost):
        b.check()


def test_commit_refuses_after_losing_the_lock(make_fs):
    fs = make_fs("local")
    lock = RunLock(fs, owner="a").acquire()
    manifest, moves = stage_run(fs, R1)
    RunLock(fs, owner="b").acquire(force=True)
    with pytest.raises(LockLost):
        commit(fs, manifest, moves, lock=lock)
    assert not fs.exists(layout.intent_file(R1))


def test_lock_as_context_manager_heartbeats_and_releases(make_fs):
    fs = make_fs("local")
    with RunLock(fs, owner="a", ttl_s=0.2) as lock:
        threading.Event().wait(0.35)  # at least one heartbeat at ttl/4
        assert fs.exists(layout.lock_heartbeat_file(lock.generation))
        with pytest.raises(LockHeld):
            RunLock(fs, owner="b").acquire()
    assert RunLock(fs).holder() is None
    RunLock(fs, owner="b").acquire()


def test_old_lock_generations_are_pruned(make_fs):
    fs = make_fs("local")
    for _ in range(5):
        RunLock(fs).acquire().release()
    names = [s.path for s in fs.list(layout.LOCK_DIR)]
    assert len([n for n in names if layout.lock_generation(n) is not None]) <= 3


def test_manifest_round_trip_and_version_check(tmp_path):
    fs = LocalFileSystem(tmp_path)
    manifest, _ = stage_run(fs, R1)
    assert Manifest.from_json(manifest.to_json()) == manifest
    assert manifest.ledger_balances() and manifest.problems() == []
    manifest.partitions[1].skipped = 1
    assert not manifest.ledger_balances()
    data = manifest.to_dict() | {"version": 99}
    with pytest.raises(ValueError, match="version"):
        Manifest.from_dict(data)


def test_lock_of_a_dead_driver_on_this_host_is_taken_at_once(fs):
    import socket
    import subprocess
    import sys

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    RunLock(fs, owner=f"{socket.gethostname()}:{gone.stdout.strip()}", ttl_s=3600).acquire()
    taken = RunLock(fs, owner="next-driver").acquire()
    assert RunLock(fs).holder()["owner"] == "next-driver"
    taken.release()
    # A live holder (this process) is not taken over before its ttl.
    RunLock(fs, ttl_s=3600).acquire()
    with pytest.raises(LockHeld):
        RunLock(fs, owner="another").acquire()
