"""The load end to end on the roots that are not a local disk: Hadoop's FileSystem API (the
hdfs:// code path: the driver through its session's JVM, the tasks through JVMs of their
own, ingest/fs/jvm.py) on Hadoop's local filesystem, with Spark local[2] and local-cluster
(executors in separate processes, one killed mid-range); and WebHDFS against the NameNode
stand-in, the tasks writing through the REST API."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.processes import ROOT
from broker.util.clock import HOUR_MS
from ingest import layout
from ingest.commit import list_runs, load_manifest
from ingest.config import load_config
from ingest.fs import HadoopFileSystem, WebHdfsFileSystem
from ingest.job import open_root, run_load
from ingest.spark_runner import spark_session
from ingest.task import FAULTS_ENV
from tests.helpers.webhdfs_server import WebHdfsServer
from tests.ingest.test_end_to_end import H0, TOPICS, Traffic, assert_output_is_exactly


@pytest.fixture(scope="module")
def sources(broker, registry):
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(t, n) for t, n in TOPICS.items()])
    return [f"bootstrap.servers={broker.bootstrap}", f"registry.url={registry.url}"]


@pytest.fixture(scope="module")
def traffic(sources):
    t = Traffic(load_config(ROOT / "conf" / "ingest.yaml", sources))
    t.produce(H0, H0 + 3 * HOUR_MS, per_topic=600, bad_every=97)
    return t


def _config(sources, root, *more):
    return load_config(
        ROOT / "conf" / "ingest.yaml",
        [*sources, f"root={root}", "limits.max.records.per.task=400", *more],
    )


def _check_run(config, traffic, fs_type, output_config=None):
    fs = open_root(config)
    assert isinstance(fs, fs_type)
    (run,) = list_runs(fs)
    manifest = load_manifest(fs, run)
    assert manifest.ledger_balances() and not manifest.problems()
    assert sum(p.quarantined for p in manifest.partitions) == traffic.bad
    assert fs.list(layout.RUNS) == [], "staging committed or discarded"
    assert_output_is_exactly(None, output_config or config, traffic)


def test_hadoop_root_with_local_master(sources, traffic, tmp_path):
    config = _config(sources, tmp_path / "root", "root.filesystem=hadoop")
    spark = spark_session("local[2]", "hadoop-root")
    try:
        result = run_load(config, spark=spark, show_progress=False)
    finally:
        spark.stop()
    assert len(result.results) > len(TOPICS)
    _check_run(config, traffic, HadoopFileSystem)


def test_hadoop_root_with_executors_in_processes_and_one_killed(sources, traffic, tmp_path):
    faults = tmp_path / "faults"
    faults.mkdir()
    (faults / "kill-task-once").write_text("armed")
    config = _config(sources, tmp_path / "root", "root.filesystem=hadoop")
    spark = spark_session(
        "local-cluster[2,1,1024]",
        "hadoop-root-cluster",
        {f"spark.executorEnv.{FAULTS_ENV}": str(faults)},
    )
    try:
        result = run_load(config, spark=spark, show_progress=False)
    finally:
        spark.stop()
    assert (faults / "task-killed").exists(), "a task attempt died"
    assert max(r.attempt for r in result.results) >= 1
    _check_run(config, traffic, HadoopFileSystem)


def test_webhdfs_root(sources, traffic, tmp_path):
    with WebHdfsServer(tmp_path / "namenode") as server:
        root = server.url.replace("http://", "webhdfs://") + "/load/root"
        config = _config(sources, root, "webhdfs.user=loader")
        spark = spark_session("local[2]", "webhdfs-root")
        try:
            run_load(config, spark=spark, show_progress=False)
        finally:
            spark.stop()
        on_disk = Path(server.base) / "load" / "root"
        _check_run(config, traffic, WebHdfsFileSystem, dict(config, root=str(on_disk)))
