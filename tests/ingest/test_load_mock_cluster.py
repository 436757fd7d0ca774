"""The load end to end against librdkafka's mock cluster: an independent implementation of
the Kafka protocol, three brokers, every topic's partitions led by several of them.

Produced with the audited producer (Avro through our registry, on its in-memory store:
the mock cannot create `_schemas`), loaded by Spark tasks (local[2]: Python workers in
processes of their own, reaching the mock's brokers in this process over loopback),
compared record by record with what was produced, then audited against the producers'
counts. The mock answers ListOffsets by timestamp with -1, so the audit's "loaded past
the hour's end" check takes its other road here: loaded to the high watermark, hour long
over.
"""

from __future__ import annotations

import pytest

from ingest.audit import audit, publish_loaded_counts
from ingest.commit import list_runs
from ingest.config import load_config
from ingest.job import open_root, run_load
from ingest.spark_runner import spark_session
from schemas.store import InMemoryStore
from tests.conftest import ROOT
from tests.ingest.test_end_to_end import (
    H0,
    HOUR,
    TOPICS,
    Traffic,
    assert_output_is_exactly,
)
from tests.mock_cluster import MOCK_PARTITIONS
from tests.schemas.conftest import start_registry


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
    t.produce(H0, H0 + 3 * HOUR, per_topic=1200, bad_every=97)
    return t


def test_load_and_audit_against_the_mock_cluster(spark, config, traffic):
    result = run_load(config, spark=spark, show_progress=False)
    m = result.manifest
    assert m.ledger_balances() and not m.problems()
    assert {(p.topic, p.partition) for p in m.partitions} == {
        (t, p) for t in TOPICS for p in range(MOCK_PARTITIONS)
    }
    assert len(result.results) > len(m.partitions)  # ranges split into several tasks
    assert sum(p.quarantined for p in m.partitions) == traffic.bad
    assert sum(p.loaded for p in m.partitions) == len(traffic.good)
    assert_output_is_exactly(spark, config, traffic)

    fs = open_root(config)
    assert publish_loaded_counts(config, fs, m) == len(m.windows)
    report = audit(config, fs, m.run_id)
    assert len(report.hours) == 9 and all(h.complete for h in report.hours), report.text()


def test_incremental_load_against_the_mock_cluster(spark, config, traffic):
    before = list_runs(open_root(config))
    traffic.produce(H0 + 3 * HOUR, H0 + 4 * HOUR, per_topic=300)
    result = run_load(config, spark=spark, show_progress=False)
    assert result.manifest.previous_run == before[-1]
    assert sum(p.loaded for p in result.manifest.partitions) == 900
    assert_output_is_exactly(spark, config, traffic)
