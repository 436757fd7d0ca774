"""Crash the commit at every filesystem operation, then recover: the outcome is always either
the run fully committed (byte for byte what an uninterrupted commit leaves) or the run not
there at all, with its staging gone. The same for crashes inside recover() itself."""

from __future__ import annotations

import os

import pytest

from ingest import layout
from ingest.commit import commit, recover, rerun_target
from ingest.fs import FileSystem, LocalFileSystem
from tests.helpers.commit_runs import HOURS, R1, R2, stage_run, tree


class Crash(Exception):
    """The driver died here."""


class _Writer:
    """Buffers a file and hands it to the real filesystem on close(), so that a crash at the
    close leaves a torn file (half of the bytes) as a dying process would."""

    def __init__(self, fs: CrashingFS, path: str):
        self.fs, self.path, self.data = fs, path, bytearray()

    def write(self, b) -> int:
        self.data += b
        return len(b)

    def close(self) -> None:
        def finish(data):
            with self.fs.inner.open_write(self.path) as f:
                f.write(data)

        try:
            self.fs.op("close", self.path, lambda: finish(bytes(self.data)))
        except Crash:
            finish(bytes(self.data[: len(self.data) // 2]))
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class CrashingFS(FileSystem):
    """A real filesystem that raises Crash at operation number ``crash_at``: before the
    operation takes effect, or (``after=True``) after it took effect but before the caller
    learns so. A recursive delete and write_bytes are broken into their elementary steps,
    so a crash can fall between them as it can on a real disk or NameNode."""

    def __init__(self, inner: FileSystem, crash_at: int | None = None, after: bool = False):
        self.inner, self.crash_at, self.after = inner, crash_at, after
        self.trace: list[tuple[str, str]] = []

    def op(self, name, path, fn):
        i = len(self.trace)
        self.trace.append((name, path))
        if i == self.crash_at and not self.after:
            raise Crash(i)
        try:
            result = fn()
        except Exception:
            if i == self.crash_at:  # died right after the operation failed
                raise Crash(i) from None
            raise
        if i == self.crash_at:
            raise Crash(i)
        return result

    def status(self, path):
        return self.op("status", path, lambda: self.inner.status(path))

    def list(self, path):
        return self.op("list", path, lambda: self.inner.list(path))

    def mkdirs(self, path):
        return self.op("mkdirs", path, lambda: self.inner.mkdirs(path))

    def open_write(self, path):
        self.op("open_write", path, lambda: None)
        return _Writer(self, path)

    def open_read(self, path):
        return self.op("open_read", path, lambda: self.inner.open_read(path))

    def rename_if_absent(self, src, dst):
        return self.op("rename", dst, lambda: self.inner.rename_if_absent(src, dst))

    def delete(self, path, recursive=False):
        st = self.status(path)
        if st is not None and st.is_dir and recursive:
            for child in self.list(path):
                self.delete(child.path, recursive=True)
        return self.op("delete", path, lambda: self.inner.delete(path))

    def uri(self, path=""):
        return self.inner.uri(path)


def setup_rerun(root) -> tuple[LocalFileSystem, object, list, list]:
    """A committed load R1 with audited hours, and a rerun R2 of it staged: the commit of R2
    has moves and deletions. Everything is deterministic, so two roots built by this are
    byte-for-byte equal."""
    fs = LocalFileSystem(root)
    load, moves = stage_run(fs, R1)
    commit(fs, load, moves)
    for hour in HOURS:
        fs.write_bytes(layout.success_marker("clicks", hour), b"audited\n")
    rerun, moves = stage_run(fs, R2, kind="rerun", replaces=R1, tag=b"+fixed")
    return fs, rerun, moves, rerun_target(fs, R1)[1]


def dirs(fs, path=""):
    out = set()
    for st in fs.list(path):
        if st.is_dir:
            out.add(st.path)
            out |= dirs(fs, st.path)
    return out


def snapshot(fs):
    """Files with bytes, and directories; the empty `_runs` directory itself may remain."""
    return tree(fs), dirs(fs) - {layout.RUNS}


def without_run_area(state):
    files, ds = state
    files = {p: b for p, b in files.items() if not p.startswith(layout.RUNS + "/")}
    return files, {d for d in ds if not d.startswith(layout.RUNS + "/")}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The states to compare against: before the commit (minus staging) and after an
    uninterrupted commit; and the trace of that commit's operations."""
    root = tmp_path_factory.mktemp("reference")
    fs, rerun, moves, replaces = setup_rerun(root / "plain")
    before = without_run_area(snapshot(fs))
    counting = CrashingFS(fs)
    commit(counting, rerun, moves, replaces)
    after = snapshot(fs)
    assert fs.list(layout.RUNS) == []
    commit_point = counting.trace.index(("rename", layout.intent_file(R2)))
    return before, after, counting.trace, commit_point


def crash_commit(root, at: int, after: bool) -> LocalFileSystem:
    fs, rerun, moves, replaces = setup_rerun(root)
    with pytest.raises(Crash):
        commit(CrashingFS(fs, at, after), rerun, moves, replaces)
    return fs


def test_reference_commit_does_moves_and_deletions(reference):
    before, after, trace, commit_point = reference
    names = [name for name, _ in trace]
    assert names.count("rename") >= 6 and "delete" in names[commit_point:]
    assert not set(before[0]) & {p for p, _ in trace[commit_point:] if p in after[0]} - set(
        before[0]
    )
    r1_files = [p for p in before[0] if R1 in p and p.startswith("data/")]
    assert r1_files and not set(r1_files) & set(after[0])
    assert layout.manifest_file(R2) in after[0]


@pytest.mark.parametrize("after", [False, True], ids=["before-op", "after-op"])
def test_crash_at_every_operation_of_commit(reference, tmp_path, after):
    before, expected, trace, commit_point = reference
    for at in range(len(trace)):
        fs = crash_commit(tmp_path / f"{at}", at, after)
        pending = fs.exists(layout.intent_file(R2))
        committed = pending or fs.exists(layout.manifest_file(R2))
        assert committed == (at > commit_point or (at == commit_point and after)), (at, trace[at])
        report = recover(fs)
        assert report.rolled_forward == ([R2] if pending else [])
        state = snapshot(fs)
        assert fs.list(layout.RUNS) == []
        if committed:
            assert state == expected, f"crash at {at} {trace[at]}"
        else:
            assert state == before, f"crash at {at} {trace[at]}"


@pytest.mark.parametrize(
    "commit_crash",
    ["uncommitted", "just-committed", "half-moved"],
)
def test_crash_at_every_operation_of_recover(reference, tmp_path, commit_crash):
    before, expected, trace, commit_point = reference
    at, after = {
        "uncommitted": (commit_point, False),
        "just-committed": (commit_point, True),
        "half-moved": (commit_point + (len(trace) - commit_point) // 2, False),
    }[commit_crash]
    counting = CrashingFS(crash_commit(tmp_path / "count", at, after))
    recover(counting)
    assert snapshot(counting.inner) == (before if commit_crash == "uncommitted" else expected)
    for j in range(len(counting.trace)):
        for recover_after in (False, True):
            fs = crash_commit(tmp_path / f"{j}-{recover_after}", at, after)
            with pytest.raises(Crash):
                recover(CrashingFS(fs, j, recover_after))
            recover(fs)  # the next driver
            state = snapshot(fs)
            want = before if commit_crash == "uncommitted" else expected
            assert state == want, f"recover crash at {j} {counting.trace[j]}"


def test_crash_between_link_and_unlink_on_a_local_disk(reference, tmp_path):
    """LocalFileSystem's fallback moves a file with link() then unlink(); dying in between
    leaves the staged and the final name on one inode. Recovery finishes the move."""
    before, expected, trace, commit_point = reference
    fs = crash_commit(tmp_path / "root", commit_point, True)
    _, rerun, moves, _ = setup_rerun(tmp_path / "again")  # the same moves, recomputed
    staged, final = moves[0]
    os.makedirs(os.path.dirname(fs.root / final), exist_ok=True)
    os.link(fs.root / staged, fs.root / final)
    recover(fs)
    assert snapshot(fs) == expected
