"""Hour compaction (ingest/compact.py): the plan as a pure function; compaction of
Parquet and Avro hours row for row, with `_SUCCESS` kept; a crash at every filesystem
operation of its commit (never a lost or doubled row, never inputs and outputs side by
side); SIGKILL of a real compaction process; reruns of compacted hours. With real Spark, a
broker and the metastore: test_compact_end_to_end.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from broker.processes import ROOT
from ingest import compact, layout
from ingest.cli import main
from ingest.commit import commit, list_runs, load_manifest, recover, rerun_target
from ingest.config import load_config
from ingest.fs import LocalFileSystem
from ingest.manifest import Manifest, RangeCount
from tests.helpers.compact_runs import TOPIC, finalize, load_run, rows, run_id
from tests.ingest.test_commit_crash import Crash, CrashingFS

HOURS = [layout.Hour("2026-11-22", "01"), layout.Hour("2026-11-22", "02")]
DIRS = [layout.partition_dir(TOPIC, h) for h in HOURS]


# ---------------------------------------------------------------------------- the plan


def src(name: str, size: int, group: str = "a") -> compact.Source:
    return compact.Source(f"d/{name}.parquet", size, 1, (RangeCount(0, 0, 1, 1),), group)


def test_plan_packs_first_fit_decreasing_per_schema_and_leaves_singletons():
    sources = [src("a", 60), src("b", 50), src("c", 40), src("d", 30), src("e", 200)]
    sources += [src("v2-a", 10, "b"), src("v2-b", 10, "b"), src("v3", 5, "c")]
    plans = compact.plan_directory("t", "d", sources, 100, "R")
    got = [[s.path for s in p.inputs] for p in plans]
    # 60+40 and 50+30 (first fit, largest first); 200 is over the target, alone; the
    # second schema's two files share an output; the third schema's one file stays.
    assert got == [
        ["d/a.parquet", "d/c.parquet"],
        ["d/b.parquet", "d/d.parquet"],
        ["d/v2-a.parquet", "d/v2-b.parquet"],
    ]
    assert [p.path for p in plans] == [f"d/t+compacted+{i}+R.parquet" for i in range(3)]


def test_plan_again_finds_nothing_and_one_file_is_never_rewritten():
    sources = [src(str(i), 10 + i) for i in range(20)]
    plans = compact.plan_directory("t", "d", sources, 64, "R")
    assert sorted(s.path for p in plans for s in p.inputs) == sorted(s.path for s in sources)
    assert all(p.bytes <= 64 for p in plans)
    outputs = [compact.Source(p.path, p.bytes, 1, (), "a") for p in plans]
    assert compact.plan_directory("t", "d", outputs, 64, "R2") == []
    assert compact.plan_directory("t", "d", [src("x", 1)], 64, "R") == []


# ---------------------------------------------------------------------------- fixtures


def config(root, *more: str) -> dict:
    return load_config(None, [f"root={root}", "compaction.lookback.hours=0", *more])


def loaded_root(root, fmt: str = "parquet", runs: int = 3) -> LocalFileSystem:
    """``runs`` committed loads, each one file per (partition range, hour), finalized."""
    fs = LocalFileSystem(root)
    for i in range(runs):
        load_run(
            fs, run_id(i + 1), [(0, i * 100, i * 100 + 100), (1, i * 40, i * 40 + 40)], HOURS, fmt
        )
    finalize(fs, HOURS)
    return fs


def hour_state(fs) -> dict:
    return {d: rows(fs, d) for d in DIRS}


def names(fs, directory: str) -> set[str]:
    return {st.path for st in fs.list(directory)}


# ---------------------------------------------------------------------------- compaction


@pytest.mark.parametrize("fmt", ["parquet", "avro"])
def test_compaction_keeps_every_row_and_success(tmp_path, fmt):
    fs = loaded_root(tmp_path, fmt)
    before = hour_state(fs)
    success = {d: json.loads(fs.read_bytes(f"{d}/_SUCCESS")) for d in DIRS}
    dry = compact.compact(config(tmp_path), topics=[TOPIC], dry_run=True)
    assert len(dry.plans) == 2 and dry.manifest is None
    assert hour_state(fs) == before and len(list_runs(fs)) == 3

    result = compact.compact(config(tmp_path), topics=[TOPIC])
    assert hour_state(fs) == before  # every row, with its _kafka_* columns, once
    for d in DIRS:
        files = [p for p in names(fs, d) if not p.endswith("_SUCCESS")]
        assert len(files) == 1 and compact.is_compacted(files[0])
        note = json.loads(fs.read_bytes(f"{d}/_SUCCESS"))
        assert {k: v for k, v in note.items() if k != "compactions"} == success[d]
        assert note["compactions"][0]["inputs"] == 6
    m = load_manifest(fs, result.run_id)
    assert m.kind == "compact" and not m.partitions and not m.windows and not m.problems()
    out = m.compacted[0]
    assert len(out.inputs) == 6 and out.records == len(before[DIRS[0]])
    assert {(r.partition, r.first, r.next) for r in out.ranges} == {
        (p, a, a + n) for i in range(3) for p, a, n in ((0, i * 100, 100), (1, i * 40, 40))
    }
    # Idempotent: nothing left to do; the ledger of the loads is untouched.
    assert compact.compact(config(tmp_path), topics=[TOPIC]).plans == []
    assert load_manifest(fs, run_id(3)).kind == "load"


def test_target_size_splits_an_hour(tmp_path):
    fs = loaded_root(tmp_path, runs=4)
    before = hour_state(fs)
    sizes = [st.size for st in fs.list(DIRS[0]) if st.path.endswith(".parquet")]
    result = compact.compact(
        config(tmp_path, f"compaction.target.file.bytes={sum(sizes) // 2}"), topics=[TOPIC]
    )
    assert hour_state(fs) == before
    outputs = [p for p in result.plans if p.directory == DIRS[0]]
    assert len(outputs) >= 2 and all(p.bytes <= sum(sizes) // 2 for p in outputs)


def test_unknown_files_are_never_compacted(tmp_path):
    fs = loaded_root(tmp_path)
    fs.write_bytes(f"{DIRS[0]}/someone-else.parquet", b"x")
    result = compact.compact(config(tmp_path), topics=[TOPIC])
    assert [p.directory for p in result.plans] == [DIRS[1]]
    assert "written by no committed run" in result.skipped[0]


# ---------------------------------------------------------------------------- crashes


def staged_compaction(root):
    """A root with loads, and a compaction of it planned and written, not committed."""
    fs = loaded_root(root, runs=2)
    run = "20261123T000000.000Z-000000cc"
    plans, _ = compact.plan_root(fs, [TOPIC], 128 << 20, run)
    written = compact.run_plans(None, compact.RootSettings(str(root)), run, plans)
    manifest, moves, deletes, writes = compact.build_commit(fs, run, 600_000, plans, written)
    return fs, manifest, moves, deletes, writes


def test_crash_at_every_operation_of_the_compaction_commit(tmp_path):
    fs, manifest, moves, deletes, writes = staged_compaction(tmp_path / "reference")
    before = hour_state(fs)
    counting = CrashingFS(fs)
    commit(counting, manifest, moves, replaces=deletes, writes=writes)
    after_names = {d: names(fs, d) for d in DIRS}
    inputs = set(deletes) - {f"{d}/_SUCCESS" for d in DIRS}
    outputs = {c.path for c in manifest.compacted}
    template = tmp_path / "template"
    staged_compaction(template)  # the same bytes and paths; copied for each crash
    for at in range(len(counting.trace)):
        for after in (False, True):
            root = tmp_path / f"crash-{at}-{after}"
            shutil.copytree(template, root)
            fs = LocalFileSystem(root)
            with pytest.raises(Crash):
                commit(CrashingFS(fs, at, after), manifest, moves, deletes, writes=writes)
            for d in DIRS:  # what a reader listing the hour sees right after the crash
                there = names(fs, d)
                assert not (there & inputs and there & outputs), (at, after, there)
            recover(fs)
            assert hour_state(fs) == before, (at, after)
            state = {d: names(fs, d) for d in DIRS}
            committed = fs.exists(layout.manifest_file(manifest.run_id))
            assert (state == after_names) == committed, (at, after, state, after_names)
            assert fs.list(layout.RUNS) == []


@pytest.mark.parametrize("point", ["compact-before-commit", "mid-moves"])
def test_sigkill_of_a_compaction_then_the_next_one_finishes(tmp_path, point):
    fs = loaded_root(tmp_path)
    before = hour_state(fs)
    script = (
        "import sys; from ingest import compact; from ingest.config import load_config;"
        "compact.compact(load_config(None, sys.argv[1:]), topics=['clicks'])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, f"root={tmp_path}", "compaction.lookback.hours=0"],
        env={**os.environ, "INGEST_CRASH_AT": point},
        cwd=ROOT,
        capture_output=True,
    )
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    result = compact.compact(config(tmp_path), topics=[TOPIC])
    assert hour_state(fs) == before
    assert all(len(names(fs, d)) == 2 for d in DIRS)  # one output + _SUCCESS
    kinds = [load_manifest(fs, r).kind for r in list_runs(fs)]
    # Killed after its commit point, the first compaction is rolled forward (the second
    # finds nothing); before it, the second compaction does the work.
    assert kinds.count("compact") == 1
    assert (result.plans == []) == (point == "mid-moves")


# ---------------------------------------------------------------------------- reruns


def rerun_compacted(fs, target: str, new_run: str):
    """What job.rerun does, with the re-read rows tagged so the test can tell them apart."""
    holder, replaced = rerun_target(fs, target)
    ranges = [(p.partition, p.first, p.next) for p in holder.partitions]
    manifest, moves = load_run(
        fs, new_run, ranges, HOURS, kind="rerun", replaces=holder.run_id, tag="+re", do_commit=False
    )
    extra_moves, extra_deletes, rewritten = compact.rerun_rewrites(fs, holder, new_run)
    manifest.compacted = rewritten
    commit(fs, manifest, [*moves, *extra_moves], replaces=[*replaced, *extra_deletes])
    finalize(fs, HOURS)  # the audit after the rerun
    return manifest


@pytest.mark.parametrize("fmt", ["parquet", "avro"])
def test_rerun_of_a_compacted_hour_replaces_exactly_its_ranges(tmp_path, fmt):
    fs = loaded_root(tmp_path, fmt)
    before = hour_state(fs)
    compact.compact(config(tmp_path), topics=[TOPIC])
    first = rerun_compacted(fs, run_id(2), "20261124T000000.000Z-00000a01")
    rr = {(0, 100, 200), (1, 40, 80)}

    def expected(state, runs_ranges):
        return {
            d: sorted(
                (
                    p,
                    o,
                    page + "+re" if any(p == q and a <= o < b for q, a, b in runs_ranges) else page,
                )
                for p, o, page in state[d]
            )
            for d in DIRS
        }

    assert hour_state(fs) == expected(before, rr)
    assert not first.problems() and len(first.compacted) == 2
    assert all(
        {(r.partition, r.first, r.next) for r in c.ranges} & rr == set() for c in first.compacted
    )
    # Compact again (the rerun's files join the rewritten output), then rerun the
    # rerun's range once more, and another run's: still exactly one row per offset.
    compact.compact(config(tmp_path), topics=[TOPIC])
    rerun_compacted(fs, run_id(2), "20261124T000000.000Z-00000a02")
    rerun_compacted(fs, run_id(1), "20261124T000000.000Z-00000a03")
    assert hour_state(fs) == expected(before, rr | {(0, 0, 100), (1, 0, 40)})


def test_rerun_refuses_when_rows_are_not_where_the_manifests_say(tmp_path):
    fs = loaded_root(tmp_path)
    compact.compact(config(tmp_path), topics=[TOPIC])
    out = next(st.path for st in fs.list(DIRS[0]) if compact.is_compacted(st.path))
    fs.delete(out)
    holder, _ = rerun_target(fs, run_id(1))
    with pytest.raises(compact.CompactionError, match="would not replace them exactly"):
        compact.rerun_rewrites(fs, holder, "20261124T000000.000Z-00000b01")


def test_manifest_round_trips_compacted_files(tmp_path):
    fs = loaded_root(tmp_path)
    result = compact.compact(config(tmp_path), topics=[TOPIC])
    m = load_manifest(fs, result.run_id)
    assert Manifest.from_json(m.to_json()) == m
    assert "compacted" not in json.loads(load_manifest(fs, run_id(1)).to_json())


# ---------------------------------------------------------------------------- CLI


def test_cli_dry_run_prints_the_plan_and_changes_nothing(tmp_path, capsys):
    fs = loaded_root(tmp_path)
    args = ["--config", str(ROOT / "conf" / "ingest.yaml"), "--set", f"root={tmp_path}"]
    code = main(
        [*args, "compact", "--topic", TOPIC, "--from", "2026-11-22T02:00Z", "--to",
         "2026-11-22T03:00Z", "--dry-run"]
    )  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "would compact data/clicks/dt=2026-11-22/hr=02: 6 files" in out and "hr=01" not in out
    assert len(list_runs(fs)) == 3
