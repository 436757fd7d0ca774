"""The commit protocol: a run's files and offsets become visible together or not at all.

Tasks write only under ``_runs/<run>/staging/``. The driver, holding the run lock:

1. ``recover()``: finishes every committed run whose moves were interrupted (roll forward)
   and deletes every ``_runs/<run>`` that was never committed.
2. ``commit()``: checks the staged files, writes the intent (every move with its size,
   every deletion, the manifest) to a temp file and renames it to ``_runs/<run>/COMMITTED``
   with ``rename_if_absent``. That rename is the commit point. Then it deletes the replaced
   files, moves each staged file to its final path, places ``history/<run>/manifest.json``
   and deletes ``_runs/<run>``. Every one of those steps is idempotent, so a crash anywhere
   after the commit point is finished by the next ``recover()`` from the intent alone.

Why nothing is lost or duplicated: before the commit point nothing outside ``_runs/<run>``
has changed and the previous manifest still holds the offsets, so the next run re-reads the
same range into fresh staging. After it, the intent names everything the run will ever do,
so the run is finished exactly as planned. See ingest/README.md, "Commit protocol".
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from ingest import layout
from ingest.fs import FileSystem, norm
from ingest.manifest import Manifest

log = logging.getLogger(__name__)

INTENT_VERSION = 1


class CommitError(Exception):
    """The commit cannot proceed safely; nothing was guessed or overwritten."""


class LockHeld(Exception):
    """Another driver holds the run lock of this root."""


class LockLost(Exception):
    """This driver's lock was broken by another driver (it thought ours was stale)."""


class Move(NamedTuple):
    staged: str  # under _runs/<run>/staging/
    final: str  # where users will read it


# ---------------------------------------------------------------------------- the run lock


@dataclass
class RunLock:
    """One driver per root at a time.

    The lock is a sequence of immutable records ``_lock/<generation>.json``; the greatest
    generation says who holds it (``state: held``) or that it is free (``state: released``).
    Acquiring writes generation ``top + 1`` with ``rename_if_absent``, so of two drivers
    racing for the same free (or stale) lock exactly one wins: the filesystem decides, not a
    read-then-write. Releasing writes one more generation with ``state: released``.

    The holder refreshes ``_lock/<generation>.heartbeat`` every ``ttl_s / 4`` seconds (a
    background thread while the lock is used as a context manager). A lock whose newest
    heartbeat (or acquisition) is older than its ``ttl_s`` belongs to a dead driver and is
    taken over by the next ``acquire()``; ``acquire(force=True)`` takes it regardless, for an
    operator who knows the old driver is gone. Clocks of driver hosts must agree to well
    within ``ttl_s``.

    A driver that stalls longer than ``ttl_s`` (GC pause, suspended VM) may find its lock
    taken: ``check()`` raises LockLost, and ``commit()`` calls it just before the commit
    point. The window left is between that check and the rename of the intent, a few
    milliseconds against a ttl of minutes.
    """

    fs: FileSystem
    owner: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    ttl_s: float = 900.0
    clock: Callable[[], float] = time.time
    generation: int | None = field(default=None, init=False)
    token: str = field(default_factory=lambda: secrets.token_hex(8), init=False)
    _stop: threading.Event | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    def _generations(self) -> list[int]:
        gens = (layout.lock_generation(s.path) for s in self.fs.list(layout.LOCK_DIR))
        return sorted(g for g in gens if g is not None)

    def _read(self, generation: int) -> dict:
        return json.loads(self.fs.read_bytes(layout.lock_file(generation)))

    def _last_alive(self, generation: int, record: dict) -> float:
        try:
            beat = json.loads(self.fs.read_bytes(layout.lock_heartbeat_file(generation)))
            return max(record["acquired_at"], beat["at"])
        except (FileNotFoundError, ValueError, KeyError):
            return record["acquired_at"]

    def holder(self) -> dict | None:
        """The record of the current holder, or None when the lock is free."""
        gens = self._generations()
        if not gens:
            return None
        record = self._read(gens[-1])
        return record if record["state"] == "held" else None

    def _write(self, generation: int, record: dict) -> bool:
        tmp = f"{layout.LOCK_DIR}/.{secrets.token_hex(6)}.tmp"
        with self.fs.open_write(tmp) as f:
            f.write(json.dumps(record).encode())
        if self.fs.rename_if_absent(tmp, layout.lock_file(generation)):
            return True
        self.fs.delete(tmp)
        return False

    def acquire(self, force: bool = False) -> RunLock:
        gens = self._generations()
        top = gens[-1] if gens else 0
        if gens:
            try:
                current = self._read(top)
            except FileNotFoundError:  # pruned by a driver that acquired meanwhile
                raise LockHeld("the run lock changed hands while we looked") from None
            if current["state"] == "held" and not force:
                idle = self.clock() - self._last_alive(top, current)
                if idle <= current["ttl_s"] and not _owner_is_dead(current["owner"]):
                    raise LockHeld(
                        f"run lock held by {current['owner']} since {current['acquired_at']:.0f}"
                        f" (last alive {idle:.0f}s ago, ttl {current['ttl_s']:.0f}s)"
                    )
                log.warning("breaking the stale run lock of %s", current["owner"])
            elif current["state"] == "held":
                log.warning("forcing the run lock away from %s", current["owner"])
        record = {
            "state": "held",
            "owner": self.owner,
            "token": self.token,
            "acquired_at": self.clock(),
            "ttl_s": self.ttl_s,
        }
        if not self._write(top + 1, record):
            raise LockHeld("another driver took the run lock at the same moment")
        self.generation = top + 1
        for old in gens[:-1]:  # keep the previous record for the operator's benefit
            self.fs.delete(layout.lock_file(old))
            self.fs.delete(layout.lock_heartbeat_file(old))
        return self

    def check(self) -> None:
        """Raise LockLost unless this driver still holds the lock."""
        if self.generation is None:
            raise LockLost("the run lock was never acquired")
        gens = self._generations()
        if not gens or gens[-1] != self.generation:
            raise LockLost(f"run lock generation {self.generation} was superseded")
        if self._read(self.generation).get("token") != self.token:
            raise LockLost("run lock record is not ours")

    def heartbeat(self) -> None:
        self.check()
        beat = json.dumps({"token": self.token, "at": self.clock()}).encode()
        self.fs.write_bytes(layout.lock_heartbeat_file(self.generation), beat)

    def release(self) -> bool:
        """Free the lock; False when it was no longer ours to free."""
        self._stop_heartbeats()
        if self.generation is None:
            return False
        gen, self.generation = self.generation, None
        record = {"state": "released", "owner": self.owner, "token": self.token}
        record["acquired_at"] = record["released_at"] = self.clock()
        record["ttl_s"] = self.ttl_s
        if not self._write(gen + 1, record):
            log.error("run lock generation %d was taken over before release", gen)
            return False
        return True

    def _beat_forever(self, stop: threading.Event) -> None:
        while not stop.wait(self.ttl_s / 4):
            try:
                self.heartbeat()
            except LockLost:
                log.error("run lock lost; stopping heartbeats")
                return
            except Exception:  # a flaky NameNode must not kill the run: retry next beat
                log.exception("run lock heartbeat failed")

    def _stop_heartbeats(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self._thread.join()
            self._stop = self._thread = None

    def __enter__(self) -> RunLock:
        self.acquire()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._beat_forever, args=(self._stop,), name="run-lock-heartbeat", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


# ---------------------------------------------------------------------------- history


def _owner_is_dead(owner: str) -> bool:
    """A holder on this very host whose process is gone (a driver killed by the OOM killer
    or a crash) cannot come back: its lock need not wait for the ttl. Holders elsewhere
    are judged by their heartbeat alone."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def list_runs(fs: FileSystem) -> list[str]:
    """Committed runs (those with a manifest in history/), oldest first."""
    runs = []
    for st in fs.list(layout.HISTORY):
        run = st.path.rsplit("/", 1)[-1]
        if st.is_dir and layout.is_run_id(run) and fs.exists(layout.manifest_file(run)):
            runs.append(run)
    return sorted(runs)


def load_manifest(fs: FileSystem, run_id: str) -> Manifest:
    return Manifest.from_json(fs.read_bytes(layout.manifest_file(run_id)))


def last_committed_manifest(fs: FileSystem, kind: str | None = None) -> Manifest | None:
    """The newest committed manifest (of ``kind`` when given), or None.

    The planner must ask for ``kind="load"``: a rerun re-reads an old run's ranges, so the
    newest manifest of any kind may be a rerun of an old run whose offsets are behind. For a
    rerun of the newest load the ranges are the same, so nothing is lost either way.
    Call ``recover()`` first: a committed run whose roll-forward was interrupted has no
    manifest in history/ until then.
    """
    for run in reversed(list_runs(fs)):
        m = load_manifest(fs, run)
        if kind is None or m.kind == kind:
            return m
    return None


def rerun_target(fs: FileSystem, run_id: str) -> tuple[Manifest, list[str]]:
    """What a rerun of ``run_id`` must replace: the manifest that now holds its ranges
    (``run_id``'s own, or that of the newest rerun that replaced it, and so on) and the paths
    to delete: that run's files plus the ``_SUCCESS`` markers of the directories they are
    in (the audit writes them again after the rerun's commit)."""
    replaced_by = {}
    for run in list_runs(fs):
        m = load_manifest(fs, run)
        if m.replaces is not None:
            replaced_by[m.replaces] = run
    holder = run_id
    while holder in replaced_by:
        holder = replaced_by[holder]
    m = load_manifest(fs, holder)
    markers = {layout.success_marker_beside(f.path) for p in m.partitions for f in p.files}
    # Its own files only: a compacted file it wrote (ingest/compact.py) holds other runs'
    # rows, and compact.rerun_rewrites decides what becomes of it.
    own = [f.path for p in m.partitions for f in (*p.files, *p.error_files)]
    return m, [*own, *sorted(markers)]


# ---------------------------------------------------------------------------- commit


def commit(
    fs: FileSystem,
    manifest: Manifest,
    moves: Iterable[tuple[str, str]],
    replaces: Iterable[str] = (),
    lock: RunLock | None = None,
    writes: dict[str, bytes] | None = None,
) -> None:
    """Commit ``manifest.run_id``: afterwards its files are at their final paths, the files
    in ``replaces`` are gone and history/<run>/manifest.json exists.

    ``writes`` (a compaction's only): small files written whole after the moves, the
    ``_SUCCESS`` markers it took away for the moves (ingest/compact.py); UTF-8 text, kept
    in the intent so a roll-forward writes them too.

    Raises CommitError before the commit point when anything is off (the run is then simply
    not committed: ``recover()`` discards its staging). An exception from the filesystem
    after the commit point leaves a committed run that ``recover()`` finishes.
    """
    run = manifest.run_id
    moves = [Move(norm(staged), norm(final)) for staged, final in moves]
    replaces = [norm(p) for p in replaces]
    writes = {norm(p): bytes(d) for p, d in (writes or {}).items()}
    _validate(fs, manifest, moves, replaces, writes)
    if fs.exists(layout.intent_file(run)) or fs.exists(layout.manifest_file(run)):
        raise CommitError(f"run {run} is already committed")
    planned = []
    for m in moves:
        st = fs.status(m.staged)
        if st is None or st.is_dir:
            raise CommitError(f"staged file missing: {m.staged}")
        planned.append({"staged": m.staged, "final": m.final, "size": st.size})
    intent = {
        "version": INTENT_VERSION,
        "run_id": run,
        "moves": planned,
        "deletes": replaces,
        "manifest": manifest.to_dict(),
    }
    if writes:
        intent["writes"] = [{"path": p, "data": d.decode()} for p, d in sorted(writes.items())]
    tmp = f"{layout.driver_tmp_dir(run)}/intent.{secrets.token_hex(4)}"
    with fs.open_write(tmp) as f:
        f.write(json.dumps(intent).encode())
    if lock is not None:
        lock.check()
    if not fs.rename_if_absent(tmp, layout.intent_file(run)):
        raise CommitError(f"run {run} was committed by someone else")
    # ---- committed: from here on the intent alone decides what happens ----
    _roll_forward(fs, intent)


def _validate(
    fs: FileSystem,
    manifest: Manifest,
    moves: list[Move],
    replaces: list[str],
    writes: dict[str, bytes],
) -> None:
    run = manifest.run_id
    problems = manifest.problems()
    if not layout.is_run_id(run):
        problems.append(f"not a run id: {run!r}")
    staging = layout.staging_dir(run) + "/"
    finals = [m.final for m in moves]
    if len(set(finals)) != len(finals):
        problems.append("two moves share a final path")
    for m in moves:
        if not m.staged.startswith(staging):
            problems.append(f"staged file outside {staging}: {m.staged}")
        if m.final.split("/", 1)[0] in (layout.RUNS, layout.LOCK_DIR):
            problems.append(f"final path in the driver's area: {m.final}")
    for path in manifest.files():
        if norm(path) not in finals:
            problems.append(f"the manifest names {path} but no move puts it there")
    if set(replaces) & set(finals):
        problems.append("a path is both replaced and moved to")
    for path in replaces:
        if path.split("/", 1)[0] not in (layout.DATA, layout.ERRORS):
            problems.append(f"a rerun replaces only data/ and errors/ files: {path}")
    if manifest.kind == "rerun":
        problems.extend(_rerun_problems(fs, manifest))
    elif manifest.kind == "compact":
        problems.extend(_compact_problems(fs, manifest, replaces, writes))
    else:
        # A load deletes only the _SUCCESS markers its records make stale (late data into
        # a finalized directory: docs/contracts/audit.md, "Late data"), never data.
        for path in replaces:
            if path.rsplit("/", 1)[-1] != layout.SUCCESS:
                problems.append(f"only a rerun replaces files; a load withdraws _SUCCESS: {path}")
    if writes and manifest.kind != "compact":
        problems.append("only a compaction writes files besides its moves")
    for c in manifest.compacted:
        missing = [i for i in c.inputs if i not in replaces]
        if missing:
            problems.append(f"{c.path} replaces {missing}, which the commit does not delete")
    if problems:
        raise CommitError("; ".join(problems))


def _rerun_problems(fs: FileSystem, manifest: Manifest) -> list[str]:
    try:
        old = load_manifest(fs, manifest.replaces)
    except FileNotFoundError:
        return [f"rerun of {manifest.replaces}, which is not a committed run"]
    out = []
    for run in list_runs(fs):
        if run != manifest.replaces and load_manifest(fs, run).replaces == manifest.replaces:
            out.append(f"{manifest.replaces} was already replaced by {run}; rerun that instead")
    ranges = {(p.topic, p.partition, p.first, p.next) for p in manifest.partitions}
    if ranges != {(p.topic, p.partition, p.first, p.next) for p in old.partitions}:
        out.append(f"a rerun must cover exactly the ranges of {old.run_id}")
    return out


def _compact_problems(
    fs: FileSystem, manifest: Manifest, replaces: list[str], writes: dict[str, bytes]
) -> list[str]:
    """A compaction deletes exactly its inputs and the markers of their directories, and
    writes back only those markers; its inputs must all be there (the run lock keeps
    anyone else from changing them between the plan and the commit point)."""
    inputs = {i for c in manifest.compacted for i in c.inputs}
    markers = {layout.success_marker_beside(i) for i in inputs}
    out = []
    if not set(replaces) <= inputs | markers or not inputs <= set(replaces):
        out.append("a compaction deletes exactly its inputs and their directories' _SUCCESS")
    if not set(writes) <= markers:
        out.append("a compaction writes only the _SUCCESS markers of its directories")
    gone = [i for i in sorted(inputs) if fs.status(i) is None]
    if gone:
        out.append(f"inputs of the compaction are gone: {gone}")
    return out


def _roll_forward(fs: FileSystem, intent: dict) -> None:
    run = intent["run_id"]
    for path in intent["deletes"]:
        fs.delete(path)
    for m in intent["moves"]:
        _finish_move(fs, m["staged"], m["final"], m["size"])
    for w in intent.get("writes", ()):  # after the moves: _SUCCESS back on the new files
        _place_write(fs, run, w["path"], w["data"].encode())
    _place_manifest(fs, run, Manifest.from_dict(intent["manifest"]).to_json())
    fs.delete(layout.run_dir(run), recursive=True)
    log.info("run %s committed: %d files", run, len(intent["moves"]))


def _finish_move(fs: FileSystem, staged: str, final: str, size: int) -> None:
    """Make ``final`` hold the staged file, whatever part of this was done before.

    - final absent, staged present: rename (never over anything).
    - final present with the recorded size: done. Its name carries this run's id, so only
      this run's own move put it there; the staged copy, if any (a crash between link and
      unlink on a local disk), goes with the staging directory.
    - final present with another size, or a directory: CommitError. Something foreign sits
      at a path only this run may write; we refuse rather than overwrite or delete it.
    - both absent: CommitError. The staged bytes are gone and were never moved: the commit
      checked them before the commit point, so someone deleted them behind our back.
    """
    for _ in range(2):  # a second look when a concurrent roller moved the file meanwhile
        dst = fs.status(final)
        if dst is not None:
            if dst.is_dir or dst.size != size:
                raise CommitError(f"{final} exists and is not the file this run staged")
            return
        try:
            if fs.rename_if_absent(staged, final):
                return
        except FileNotFoundError:
            pass
    if fs.status(final) is None:
        raise CommitError(f"staged file {staged} is gone and {final} was never written")


def _place_write(fs: FileSystem, run: str, path: str, data: bytes) -> None:
    """Write ``path`` through the run's temp dir (a crash leaves no litter beside it);
    a file already there is this roll-forward's earlier write, or newer (an audit's)."""
    if fs.exists(path):
        return
    tmp = f"{layout.driver_tmp_dir(run)}/write.{secrets.token_hex(4)}"
    with fs.open_write(tmp) as f:
        f.write(data)
    if not fs.rename_if_absent(tmp, path):
        fs.delete(tmp)


def _place_manifest(fs: FileSystem, run: str, data: bytes) -> None:
    target = layout.manifest_file(run)
    if not fs.exists(target):
        tmp = f"{layout.driver_tmp_dir(run)}/manifest.{secrets.token_hex(4)}"
        with fs.open_write(tmp) as f:
            f.write(data)
        if fs.rename_if_absent(tmp, target):
            return
    if fs.read_bytes(target) != data:
        raise CommitError(f"{target} exists with other content")


# ---------------------------------------------------------------------------- recovery


@dataclass
class Recovery:
    rolled_forward: list[str] = field(default_factory=list)
    discarded: list[str] = field(default_factory=list)


def read_intent(fs: FileSystem, run_id: str) -> dict | None:
    try:
        data = fs.read_bytes(layout.intent_file(run_id))
    except FileNotFoundError:
        return None
    intent = json.loads(data)  # written whole and renamed: a parse error is real damage
    if intent.get("version") != INTENT_VERSION or intent.get("run_id") != run_id:
        raise CommitError(f"commit intent of {run_id} is not one this code knows")
    return intent


def recover(fs: FileSystem, lock: RunLock | None = None) -> Recovery:
    """Run first by every driver, under the lock: finish committed runs, drop the rest."""
    if lock is not None:
        lock.check()
    report = Recovery()
    for st in fs.list(layout.RUNS):
        run = st.path.rsplit("/", 1)[-1]
        intent = read_intent(fs, run) if st.is_dir else None
        if intent is not None:
            log.warning("rolling forward the interrupted commit of run %s", run)
            _roll_forward(fs, intent)
            report.rolled_forward.append(run)
        else:
            log.info("discarding uncommitted staging of %s", run)
            fs.delete(st.path, recursive=True)
            report.discarded.append(run)
    return report
