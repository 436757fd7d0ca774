"""Late data into finalized hours, and the table following the files (issue 26): a real
broker and registry, audited producers, Spark (local[2]) with the embedded Hive metastore
(Derby in a temp dir), the load, audit, finalize and registration as `python -m ingest
run` does them, and the tables read through Spark SQL after each step.

One module, one Hive-enabled session; the tests run in order and build on each other:
v1 loaded and finalized for three hours; v2 records (a field `tag`, and `region` inside
the nested `meta`) late for the same hours; a rerun of the late run; a change the tables
cannot follow. A Parquet topic and an Avro one throughout.
"""

from __future__ import annotations

import io
import json

import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.processes import ROOT
from broker.util.clock import HOUR_MS, now_ms
from ingest import audit, layout, status, warehouse
from ingest.cli import _audit_and_finalize, _tables_behind
from ingest.config import load_config
from ingest.job import open_root, rerun, run_load
from ingest.spark_runner import spark_session
from schemas.audited_producer import AuditedProducer

NOW = now_ms()
H0 = NOW - NOW % HOUR_MS - 5 * HOUR_MS  # three hours that ended long ago
HOURS = [layout.Hour.of_ms(H0 + i * HOUR_MS) for i in range(3)]
TOPICS = {"late-views": "parquet", "late-clicks": "avro"}
ON_TIME, LATE = 20, 9  # records per topic and hour

V1 = {
    "type": "record",
    "name": "LateEvent",
    "namespace": "com.example.late",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "n", "type": "int"},
        {
            "name": "meta",
            "type": {
                "type": "record",
                "name": "Meta",
                "fields": [{"name": "source", "type": "string"}],
            },
        },
    ],
}


def _v2(n_type: str = "int") -> dict:
    """v1 plus `tag` (union with null, default null) and `region` inside `meta`."""
    schema = json.loads(json.dumps(V1))
    schema["fields"][1]["type"] = n_type
    schema["fields"][2]["type"]["fields"].append(
        {"name": "region", "type": ["null", "string"], "default": None}
    )
    schema["fields"].append({"name": "tag", "type": ["null", "string"], "default": None})
    return schema


@pytest.fixture(scope="module")
def config(broker, registry, tmp_path_factory):
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(t, 2) for t in TOPICS])
    meta = tmp_path_factory.mktemp("metastore")
    return load_config(
        ROOT / "conf" / "ingest.yaml",
        [
            f"bootstrap.servers={broker.bootstrap}",
            f"registry.url={registry.url}",
            f"root={tmp_path_factory.mktemp('root')}",
            "topics.whitelist=late-.*",
            "per.topic.format=late-clicks=avro",
            "warehouse.registrar=hive",
            f"warehouse.metastore.derby.dir={meta / 'derby'}",
            f"warehouse.dir={meta / 'spark-warehouse'}",
        ],
    )


@pytest.fixture(scope="module")
def spark(config):
    session = spark_session("local[2]", "late-data-tests", warehouse.spark_conf(config))
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def produce(config, schema: dict, per_hour: int, prefix: str, **fields) -> None:
    with AuditedProducer(
        config["bootstrap.servers"],
        registry=config["registry.url"],
        service="late-data",
        emit_interval_s=None,
    ) as producer:
        for topic in TOPICS:
            for hour in HOURS:
                for i in range(per_hour):
                    ts = hour.start_ms + 1000 + i * (HOUR_MS - 2000) // per_hour
                    value = {
                        "id": f"{prefix}-{hour.hr}-{i}",
                        "n": i,
                        "meta": {"source": prefix, **fields.get("meta", {})},
                        **{k: v for k, v in fields.items() if k != "meta"},
                    }
                    producer.send_avro(topic, value, schema, key=str(i).encode(), timestamp_ms=ts)
        producer.flush()


def load(config, spark):
    """The CLI's `run`: load, audit, finalize, register."""
    result = run_load(config, spark=spark, show_progress=False)
    out = io.StringIO()
    _audit_and_finalize(config, open_root(config), result.manifest, out, spark)
    return result.manifest, out.getvalue()


def success(fs, topic, hour) -> dict | None:
    marker = layout.success_marker(topic, hour)
    return json.loads(fs.read_bytes(marker)) if fs.exists(marker) else None


def counts(spark, topic, *columns: str) -> dict[str, tuple]:
    """hr -> (count(*), count(column), ...) of the topic's table."""
    selected = ", ".join(["count(*)", *(f"count({c})" for c in columns)])
    rows = spark.sql(
        f"SELECT hr, {selected} FROM kafka_hourly.{warehouse.table_name(topic)} GROUP BY hr"
    ).collect()
    return {r[0]: tuple(r[1:]) for r in rows}


def test_v1_hours_are_finalized_as_revision_1(spark, config):
    produce(config, V1, ON_TIME, "v1")
    _, out = load(config, spark)
    assert "NOT registered" not in out, out
    fs = open_root(config)
    for topic in TOPICS:
        for hour in HOURS:
            marker = success(fs, topic, hour)
            assert marker and marker["revision"] == 1 and marker["late"] == 0, (topic, hour)
            assert marker["loaded"] == ON_TIME
        assert counts(spark, topic) == {h.hr: (ON_TIME,) for h in HOURS}


def test_late_v2_records_reopen_the_hours_and_the_tables_follow(spark, config):
    fs = open_root(config)
    produce(config, _v2(), LATE, "v2", tag="t", meta={"region": "eu"})
    result = run_load(config, spark=spark, show_progress=False)
    # Committed: the late files are in the finalized directories, and no _SUCCESS that
    # counted without them is left beside them; the directories wait for their tables.
    assert {(f.dt, f.hr) for p in result.manifest.partitions for f in p.files} == {
        (h.dt, h.hr) for h in HOURS
    }
    dirs = sorted(layout.partition_dir(t, h) for t in TOPICS for h in HOURS)
    assert all(success(fs, t, h) is None for t in TOPICS for h in HOURS)
    assert warehouse.pending(fs) == dirs
    out = io.StringIO()
    _audit_and_finalize(config, fs, result.manifest, out, spark)
    out = out.getvalue()
    for topic in TOPICS:
        table = f"kafka_hourly.{warehouse.table_name(topic)}"
        assert f"warehouse: evolved table {table}" in out, out
        for hour in HOURS:
            marker = success(fs, topic, hour)
            assert marker["revision"] == 2 and marker["late"] == LATE, marker
            assert marker["loaded"] == ON_TIME + LATE and marker["complete"]
            state = audit.read_revision(fs, layout.success_marker(topic, hour))
            assert [r["revision"] for r in state["revisions"]] == [1, 2]
            assert state["first_accounted"] == ON_TIME
        # The new fields: appended, null in the v1 files; the nested one widened `meta`.
        assert counts(spark, topic, "tag", "meta.region") == {
            h.hr: (ON_TIME + LATE, LATE, LATE) for h in HOURS
        }, topic
        v1_row = spark.sql(f"SELECT tag, meta FROM {table} WHERE id = 'v1-{HOURS[0].hr}-0'").first()
        assert v1_row.tag is None and v1_row.meta.region is None and v1_row.meta.source == "v1"
    assert warehouse.pending(fs) == []
    # The audit report and `status` show the late records per hour.
    report = audit.read_report(fs, result.manifest.run_id)
    assert {(h.topic, h.hr, h.late, h.revision) for h in report.hours} == {
        (t, h.hr, LATE, 2) for t in TOPICS for h in HOURS
    }
    assert "revision 2" in report.text()
    lines = [line.text for s in status._load(fs) for line in s.lines]
    for topic in TOPICS:
        late = next(t for t in lines if t.startswith(f"{topic}: late records"))
        assert all(f"{h.dt} {h.hr}h +{LATE} (revision 2)" in late for h in HOURS), late


def test_a_rerun_of_the_late_run_is_the_next_revision(spark, config):
    fs = open_root(config)
    late_run = audit.current_manifests(fs)[-1].run_id
    done = rerun(config, run_id=late_run, spark=spark, show_progress=False)
    out = io.StringIO()
    _audit_and_finalize(config, fs, done[-1].manifest, out, spark)
    assert "NOT registered" not in out.getvalue()
    for topic in TOPICS:
        for hour in HOURS:
            marker = success(fs, topic, hour)
            assert (marker["revision"], marker["late"], marker["loaded"]) == (
                3,
                LATE,
                ON_TIME + LATE,
            )
        assert counts(spark, topic, "tag") == {h.hr: (ON_TIME + LATE, LATE) for h in HOURS}


def test_a_change_the_table_cannot_follow_stays_queued_with_the_reason(spark, config):
    fs = open_root(config)
    hour = HOURS[0]
    with AuditedProducer(
        config["bootstrap.servers"], registry=config["registry.url"], service="late-data"
    ) as producer:
        for topic in TOPICS:
            value = {"id": "v3", "n": 2**40, "meta": {"source": "v3", "region": None}, "tag": None}
            producer.send_avro(topic, value, _v2("long"), timestamp_ms=hour.start_ms + 5)
        producer.flush()
    _, out = load(config, spark)
    queued = warehouse.pending(fs)
    assert queued == sorted(layout.partition_dir(t, hour) for t in TOPICS), out
    for directory in queued:
        reason = json.loads(fs.read_bytes(layout.table_pending_file(directory)))["error"]
        assert "column n changed from int to bigint" in reason, reason
    assert "NOT registered" in out and _tables_behind(config)
    # The data and its audit do not depend on the table: the hour is finalized again.
    assert success(fs, "late-views", hour)["revision"] == 4
