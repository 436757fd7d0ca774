"""Fixtures of the load's tests: a local Spark session, and a FileSystem of every kind
(local; Hadoop on file:// through a real Spark driver's JVM; WebHDFS through the real `hdfs` client against
tests/helpers/webhdfs_server.py) for the filesystem contract and the commit protocol."""

from __future__ import annotations

import pytest

from ingest.fs import HadoopFileSystem, LocalFileSystem, WebHdfsFileSystem
from tests.helpers.cluster import broker_without_group_delay  # noqa: F401  (broker_overrides)
from tests.helpers.webhdfs_server import WebHdfsServer

KINDS = ["local", "hadoop", "webhdfs"]


@pytest.fixture(scope="module")
def spark():
    """One local[1] session for the module; stopped so other modules can choose their master."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[1]")
        .appName("ingest-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture
def make_fs(request, tmp_path):
    """make_fs(kind) -> a FileSystem rooted in a fresh directory under tmp_path."""
    servers: list[WebHdfsServer] = []

    def make(kind: str, name: str = "root"):
        base = tmp_path / f"{kind}-{name}"
        if kind == "local":
            return LocalFileSystem(base)
        if kind == "hadoop":
            return HadoopFileSystem(request.getfixturevalue("spark"), base.as_uri())
        if kind == "webhdfs":
            server = WebHdfsServer(tmp_path / f"namenode-{name}").__enter__()
            servers.append(server)
            return WebHdfsFileSystem(server.url, "/load/root", user="test")
        raise ValueError(kind)

    yield make
    for s in servers:
        s.__exit__(None, None, None)


@pytest.fixture(params=KINDS)
def fs(request, make_fs):
    return make_fs(request.param)


# The load also runs against librdkafka's mock cluster (test_load_mock_cluster.py).
from tests.helpers.mock_cluster import mock_cluster  # noqa: E402,F401  (fixture)
