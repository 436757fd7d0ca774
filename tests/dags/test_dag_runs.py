"""Each DAG run end to end with dag.test(): a real broker and registry, spark-submit on
Spark local, the SQLite metadata database of this session. The endpoints reach the job
through Airflow Connections and the config path through an Airflow Variable, as in a
deployment; the config file itself points nowhere useful."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from broker.util.clock import HOUR_MS, now_ms

pytest.importorskip("ingest.job", reason="ingest.job not available yet")

from broker.client.admin import AdminClient, NewTopic  # noqa: E402
from ingest import layout  # noqa: E402
from ingest.commit import list_runs, load_manifest  # noqa: E402
from schemas import catalog  # noqa: E402
from schemas.audited_producer import AuditedProducer  # noqa: E402
from schemas.samples import events  # noqa: E402

NOW = now_ms()
# Three whole event hours that ended long enough ago for the audit to call them complete.
H0 = NOW - NOW % HOUR_MS - 5 * HOUR_MS
TOPICS = {"searches": 2, "clicks": 1}
PER_TOPIC = 300
BAD_EVERY = 50  # undecodable values: counted by the producer, quarantined by the load


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="module")
def airflow_env(broker, registry, warehouse, tmp_path_factory, airflow_db):
    """The Variable and Connections a deployment would define, as AIRFLOW_VAR_/AIRFLOW_CONN_."""
    conf = tmp_path_factory.mktemp("conf") / "ingest.yaml"
    conf.write_text(
        "bootstrap.servers: [127.0.0.1:1]\n"  # overridden by kafka_default
        "registry.url: http://127.0.0.1:1\n"  # overridden by schema_registry_default
        f"root: {warehouse}\n"
        "topics: {whitelist: ['.*'], blacklist: ['_.*']}\n"
        "spark.master: local[1]\n"  # spark-submit and the driver use spark_default
    )
    host, port = registry.url.removeprefix("http://").split(":")
    env = {
        "AIRFLOW_VAR_KAFKA_HOURLY_CONFIG": str(conf),
        "AIRFLOW_CONN_KAFKA_DEFAULT": json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": broker.bootstrap}}
        ),
        "AIRFLOW_CONN_SCHEMA_REGISTRY_DEFAULT": json.dumps(
            {"conn_type": "http", "host": host, "port": int(port)}
        ),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield env
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def traffic(broker, registry) -> dict[str, int]:
    """Audited Avro traffic over three event hours; returns records produced per topic."""
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(t, n) for t, n in TOPICS.items()])
    schemas = {
        "searches": catalog.load_str("SearchEvent"),
        "clicks": catalog.load_str("ClickEvent"),
    }
    produced = dict.fromkeys(TOPICS, 0)
    with AuditedProducer(
        broker.bootstrap, registry=registry.url, service="dags-test", emit_interval_s=None
    ) as producer:
        for topic in TOPICS:
            for i, event in enumerate(events(topic, PER_TOPIC, H0, H0 + 3 * HOUR_MS, seed=7)):
                ts = event["header"]["time"]
                if i % BAD_EVERY == BAD_EVERY - 1:
                    producer.send(topic, b"\x00\x00\x00\x00\x07garbage", timestamp_ms=ts)
                else:
                    producer.send_avro(topic, event, schemas[topic], timestamp_ms=ts)
                produced[topic] += 1
        producer.flush()
    return produced


def _task_states(dag_run) -> dict[str, str]:
    from airflow.models import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter(
            TaskInstance.dag_id == dag_run.dag_id, TaskInstance.run_id == dag_run.run_id
        )
        return {ti.task_id: str(ti.state) for ti in tis}


def _asset_event_uris() -> list[str]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(AssetModel.uri).join(AssetEvent, AssetEvent.asset_id == AssetModel.id)
        return sorted(uri for (uri,) in rows)


def _hours() -> list[layout.Hour]:
    return [layout.Hour.of_ms(H0 + i * HOUR_MS) for i in range(3)]


def test_hourly_load_loads_audits_and_finalizes(dagbag, airflow_env, traffic, warehouse):
    dag = dagbag.get_dag("kafka_hourly_load")
    # Airflow 3.3.2's dag.test() builds its scheduler DAG by serializing in memory, so the
    # deadline alerts stay dicts where DagRun.update_state expects the ids of stored
    # DeadlineAlert rows, and a successful run crashes while pruning its deadlines. The
    # scheduler path is unaffected; the alert itself is checked in test_dag_definitions.
    dag.deadline = None
    dag_run = dag.test()
    states = _task_states(dag_run)
    assert dag_run.state == "success", states
    assert states == {
        **dict.fromkeys(["plan", "load", "audit", "finalize", "register"], "success"),
        # conf/ingest.yaml names no topic in compaction.topics: no spark-submit
        **dict.fromkeys(["compaction_wanted"], "success"),
        "compact": "skipped",
    }

    # One committed load holding exactly what was produced (loaded + quarantined).
    runs = list_runs(_fs(warehouse))
    assert len(runs) == 1
    manifest = load_manifest(_fs(warehouse), runs[0])
    assert manifest.kind == "load" and manifest.ledger_balances()
    for topic, n in traffic.items():
        parts = [p for p in manifest.partitions if p.topic == topic]
        assert sum(p.loaded + p.quarantined for p in parts) == n
        assert sum(p.quarantined for p in parts) == n // BAD_EVERY

    # _SUCCESS and one Asset event per topic-hour.
    expected = []
    for topic in TOPICS:
        for hour in _hours():
            assert (warehouse / layout.success_marker(topic, hour)).exists()
            expected.append(f"kafka-hourly://{topic}/dt={hour.dt}/hr={hour.hr}")
    assert _asset_event_uris() == sorted(expected)
    assert (warehouse / layout.history_dir(runs[0]) / "audit.json").exists()


def test_rerun_replaces_a_run_and_leaves_counts_unchanged(dagbag, airflow_env, warehouse):
    fs = _fs(warehouse)
    (stored,) = list_runs(fs)
    before = load_manifest(fs, stored)
    files_before = sorted(p.name for p in warehouse.glob("data/*/dt=*/hr=*/*.parquet"))

    dag_run = dagbag.get_dag("kafka_hourly_rerun").test(run_conf={"run_id": stored})
    states = _task_states(dag_run)
    assert dag_run.state == "success", states

    runs = list_runs(fs)
    assert len(runs) == 2
    after = load_manifest(fs, runs[1])
    assert after.kind == "rerun" and after.replaces == stored
    counts = {
        (p.topic, p.partition): (p.first, p.next, p.loaded, p.quarantined)
        for p in before.partitions
    }
    assert {
        (p.topic, p.partition): (p.first, p.next, p.loaded, p.quarantined) for p in after.partitions
    } == counts
    # The stored run's files were replaced: the same offsets, now named by the rerun.
    files_after = sorted(p.name for p in warehouse.glob("data/*/dt=*/hr=*/*.parquet"))
    assert len(files_after) == len(files_before)
    assert all(name.endswith(f"+{runs[1]}.parquet") for name in files_after)
    # Downstream hears that the (complete) hours it consumed changed.
    assert len(_asset_event_uris()) == 2 * len(TOPICS) * 3


def _fs(warehouse: Path):
    from ingest.fs import filesystem_for

    return filesystem_for(str(warehouse))
