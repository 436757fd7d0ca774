"""The load on a real Spark standalone cluster: a master and two workers (spark-class, as an
operator starts them), the load submitted through spark-submit in client mode exactly as
the DAG's SparkSubmitOperator does, onto a Hadoop root (the hdfs:// code path: tasks
write through their own JVMs). Then the crashes: an executor JVM killed (SIGKILL) while
its task is mid-range -- Spark runs the task again elsewhere and the load stays exactly
once -- and the driver killed before and after its commit point, after which the next
submission recovers. The checks are those of test_end_to_end.py's local-master runs.

Cluster deploy mode is not tested: Spark refuses it for Python applications on a
standalone master.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from broker.processes import ROOT
from broker.util.clock import HOUR_MS
from ingest.commit import list_runs, load_manifest
from ingest.job import CRASH_ENV, open_root
from ingest.spark_standalone import StandaloneCluster, spark_env, submit_command
from ingest.task import FAULTS_ENV
from tests.ingest.test_end_to_end import (
    H0,
    Traffic,
    assert_output_is_exactly,
    topics_and_config,
)

pytestmark = pytest.mark.slow
TASK_RECORDS = 500  # several tasks per partition


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with StandaloneCluster(tmp_path_factory.mktemp("spark"), workers=2) as c:
        yield c


@pytest.fixture(scope="module")
def faults(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="module")
def config(broker, registry, tmp_path_factory):
    hadoop_root = ("root.filesystem=hadoop", f"limits.max.records.per.task={TASK_RECORDS}")
    return topics_and_config(broker, registry, tmp_path_factory.mktemp("warehouse"), *hadoop_root)


@pytest.fixture(scope="module")
def traffic(config):
    t = Traffic(config)
    t.produce(H0, H0 + 3 * HOUR_MS, per_topic=1000, bad_every=97)
    return t


def _command(cluster, config, faults, *args: str) -> list[str]:
    cli = ["--config", str(ROOT / "conf" / "ingest.yaml")]
    for key in ("bootstrap.servers", "registry.url", "root", "root.filesystem"):
        value = config[key]
        cli += ["--set", f"{key}={','.join(value) if isinstance(value, list) else value}"]
    # The driver builds its session on the master it is given, as the DAG passes it.
    cli += ["--set", f"spark.master={cluster.master_url}"]
    cli += ["--set", f"limits.max.records.per.task={TASK_RECORDS}", *args]
    conf = {"spark.executor.memory": "512m", f"spark.executorEnv.{FAULTS_ENV}": str(faults)}
    return submit_command(cluster.master_url, cli, conf)


def _submit(cluster, config, faults, *args, crash_at=None, wait=True):
    env = spark_env()
    if crash_at:
        env[CRASH_ENV] = crash_at
    proc = subprocess.Popen(
        _command(cluster, config, faults, *args),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if not wait:
        return proc
    out, err = proc.communicate(timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _executor_jvm(pid: int) -> int:
    """The executor JVM above a Python worker (pyspark's daemon sits in between)."""
    while pid > 1:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"CoarseGrainedExecutorBackend" in cmdline:
            return pid
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    raise LookupError("no executor JVM above the paused task")


# One submission for both the whole load and an executor's crash (each submission costs
# most of a minute on two cores): the summary, audit and progress of a submitted run must
# come out exact whether or not one of its tasks ran twice.
def test_load_submitted_with_an_executor_killed_mid_task_is_exact(cluster, config, traffic, faults):
    (faults / "pause-task-once").write_text("armed")
    proc = _submit(cluster, config, faults, "run", wait=False)
    paused = faults / "task-paused"
    deadline = time.monotonic() + 300
    while not paused.exists():
        assert proc.poll() is None, proc.stderr.read()[-4000:]
        assert time.monotonic() < deadline, "no task paused"
        time.sleep(0.2)
    executor = _executor_jvm(json.loads(paused.read_text())["pid"])
    os.kill(executor, signal.SIGKILL)
    paused.unlink()  # the orphaned Python worker may go on; its attempt is never committed
    out, err = proc.communicate(timeout=600)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert done.returncode == 0, done.stderr[-4000:]
    # Spark ran the killed executor's task again elsewhere.
    assert "ExecutorLostFailure" in err or "Lost executor" in err, err[-4000:]
    # The summary and the audit (the command line's), and progress while the tasks ran
    # (spark-submit hands on the Python driver's stdout and stderr as its stdout).
    assert "ledger balances" in done.stdout, done.stdout
    assert "hour(s) complete (_SUCCESS written)" in done.stdout
    progress = [line for line in done.stdout.splitlines() if line.startswith("[load] tasks")]
    assert progress, done.stdout[-4000:]
    fs = open_root(config)
    (run,) = list_runs(fs)
    manifest = load_manifest(fs, run)
    assert manifest.ledger_balances() and not manifest.problems()
    # Counted once each, the task that ran twice too.
    tasks = sum(-(-(p.next - p.first) // TASK_RECORDS) for p in manifest.partitions)
    assert progress[-1].startswith(f"[load] tasks {tasks}/{tasks} ")
    records = sum(p.loaded + p.quarantined for p in manifest.partitions)
    assert f"records {records:,}" in progress[-1]
    assert_output_is_exactly(None, config, traffic)
    # Both workers ran executors of the application.
    app = cluster.state()["completedapps"][-1]
    assert app["name"] == config["spark.app.name"]
    assert len(list(Path(cluster.workdir).glob(f"worker-*/{app['id']}"))) == 2
    # The standalone worker replaces the lost executor; the cluster keeps two workers.
    assert cluster.alive_workers() == 2


# After the commit point only: the harder case (the next driver finishes the moves), and
# each submission costs a minute on two cores; test_end_to_end.py kills before it too.
@pytest.mark.parametrize("crash_at", ["mid-moves"])
def test_driver_killed_then_next_submission_is_exact(cluster, config, traffic, faults, crash_at):
    fs = open_root(config)
    runs_before = list_runs(fs)
    traffic.produce(H0 + 3 * HOUR_MS, H0 + 4 * HOUR_MS, per_topic=300)
    died = _submit(cluster, config, faults, "run", "--no-audit", crash_at=crash_at)
    assert died.returncode != 0, died.stderr[-4000:]
    assert f"{CRASH_ENV}={crash_at}: killing the driver here" in died.stdout
    root = Path(config["root"])
    if crash_at == "before-commit":
        assert list_runs(fs) == runs_before
    else:
        assert any((root / "_runs").glob("*/COMMITTED")), "crashed after the commit point"
    done = _submit(cluster, config, faults, "run", "--no-audit")
    assert done.returncode == 0, done.stderr[-4000:]
    if crash_at == "mid-moves":
        assert "rolled forward the interrupted commit" in done.stdout
    assert not any((root / "_runs").iterdir()), "no staging left behind"
    assert_output_is_exactly(None, config, traffic)
    for run in list_runs(fs):
        assert load_manifest(fs, run).ledger_balances()
