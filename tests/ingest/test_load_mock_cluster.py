"""The load end to end against librdkafka's mock cluster: an independent implementation of
the Kafka protocol, three brokers, each topic's partitions led by several of them.

The first two tests of test_end_to_end.py (load with audit and _SUCCESS, then an
incremental load; output compared record by record with what was produced) run here
again, on this module's fixtures: the topics on the mock (MOCK_PARTITIONS partitions
each), the registry on its in-memory store (the mock cannot create `_schemas`: it has no
CreateTopics), Spark local[2] (Python workers in processes of their own, reaching the
mock's brokers in this process over loopback).

The mock answers ListOffsets by timestamp with -1, so the audit's "loaded past the
hour's end" check takes its other road here: loaded to the high watermark, hour long
over.
"""

from __future__ import annotations

import pytest

from broker.processes import ROOT
from broker.util.clock import HOUR_MS
from ingest.config import load_config
from ingest.spark_runner import spark_session
from schemas.store import InMemoryStore
from tests.helpers.mock_cluster import MOCK_PARTITIONS
from tests.ingest import test_end_to_end as e2e
from tests.ingest.test_end_to_end import H0, TOPICS, Traffic
from tests.schemas.conftest import start_registry

# The tests of test_end_to_end.py collected here too, in this order (they build on each
# other), on this module's fixtures.
test_load_end_to_end = e2e.test_load_end_to_end
test_incremental_load_adds_only_new_records = e2e.test_incremental_load_adds_only_new_records


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]", "mock-cluster-load")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def registry_url():
    server, _ = start_registry(InMemoryStore())
    with server as url:
        yield url


@pytest.fixture(scope="module")
def config(mock_cluster, registry_url, tmp_path_factory):
    mock_cluster.create_topics(list(TOPICS))
    return load_config(
        ROOT / "conf" / "ingest.yaml",
        [
            f"bootstrap.servers={mock_cluster.bootstrap}",
            f"registry.url={registry_url}",
            f"root={tmp_path_factory.mktemp('warehouse')}",
            "limits.max.records.per.task=200",  # several tasks per partition
        ],
    )


@pytest.fixture(scope="module")
def traffic(config):
    t = Traffic(config)
    t.produce(H0, H0 + 3 * HOUR_MS, per_topic=1500, bad_every=97)
    return t


def test_every_partition_of_the_mock_was_read(config, traffic):
    """After the two loads: each partition of each topic was read and loaded."""
    from ingest.commit import list_runs, load_manifest
    from ingest.job import open_root

    fs = open_root(config)
    runs = list_runs(fs)
    assert len(runs) == 2
    first = load_manifest(fs, runs[0])
    assert {(p.topic, p.partition) for p in first.partitions} == {
        (t, p) for t in TOPICS for p in range(MOCK_PARTITIONS)
    }
    assert all(p.loaded > 0 for p in first.partitions)
