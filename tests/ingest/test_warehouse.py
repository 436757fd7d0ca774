"""Warehouse tables end to end: a real broker and registry, real Spark (local[2]) with
Spark's embedded Hive metastore (Derby in a temp dir), the load, the audit and
finalize as the CLI runs them, then queries through spark.sql.

One module so the Hive-enabled session (slow to start) is shared; the tests run in order
and build on each other: register, rerun, schema evolution, a metastore that is down,
re-registering everything.
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
from collections import defaultdict

import pytest

from broker.processes import ROOT
from broker.util.clock import HOUR_MS
from ingest import layout, warehouse
from ingest.cli import _audit_and_finalize
from ingest.commit import list_runs
from ingest.job import open_root, rerun, run_load
from ingest.spark_runner import spark_session
from schemas import catalog
from schemas.audited_producer import AuditedProducer
from schemas.samples import events
from tests.ingest.test_end_to_end import H0, TOPICS, Traffic, topics_and_config

DB = "kafka_hourly"


@pytest.fixture(scope="module")
def config(broker, registry, tmp_path_factory):
    meta = tmp_path_factory.mktemp("metastore")
    return topics_and_config(
        broker,
        registry,
        tmp_path_factory.mktemp("warehouse"),
        "per.topic.format=clicks=avro",  # one Avro table beside the Parquet ones
        "warehouse.registrar=hive",
        f"warehouse.metastore.derby.dir={meta / 'derby'}",
        f"warehouse.dir={meta / 'spark-warehouse'}",
    )


@pytest.fixture(scope="module")
def spark(config):
    session = spark_session("local[2]", "warehouse-tests", warehouse.spark_conf(config))
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def traffic(config):
    t = Traffic(config)
    t.produce(H0, H0 + 3 * HOUR_MS, per_topic=600, bad_every=97)
    return t


def load_and_finalize(config, spark, **kwargs):
    """The CLI's `run`: load, audit, finalize, register. Returns (manifest, output)."""
    result = run_load(config, spark=spark, show_progress=False, **kwargs)
    out = io.StringIO()
    _audit_and_finalize(config, open_root(config), result.manifest, out, spark)
    return result.manifest, out.getvalue()


def produced_by_hour(traffic) -> dict[tuple[str, str, str], dict[str, int]]:
    """(topic, dt, hr) -> {event_id: member_id} of the decodable records produced."""
    out: dict[tuple[str, str, str], dict[str, int]] = defaultdict(dict)
    for event_id, (topic, event) in traffic.good.items():
        hour = layout.Hour.of_ms(event["header"]["time"])
        out[(topic, hour.dt, hour.hr)][event_id] = event["member_id"]
    return out


def table_hour(spark, topic: str, dt: str, hr: str) -> dict[str, int]:
    rows = spark.sql(
        f"SELECT header.event_id AS id, member_id FROM {DB}.{warehouse.table_name(topic)} "
        f"WHERE dt = '{dt}' AND hr = '{hr}'"
    ).collect()
    assert len(rows) == len({r.id for r in rows}), "duplicate rows"
    return {r.id: r.member_id for r in rows}


def registrations(spark) -> dict[str, list[tuple[str, str]]]:
    """Every table's partitions with their locations, and its columns."""
    out = {}
    for t in spark.catalog.listTables(DB):
        name = f"{DB}.{t.name}"
        parts = []
        for row in spark.sql(f"SHOW PARTITIONS {name}").collect():
            spec = ", ".join(
                f"{k}='{v}'" for k, v in (level.split("=") for level in row.partition.split("/"))
            )
            detail = spark.sql(f"DESCRIBE FORMATTED {name} PARTITION ({spec})").collect()
            location = next(r.data_type for r in detail if r.col_name.strip() == "Location")
            parts.append((row.partition, location))
        out[name] = (sorted(parts), spark.table(name).schema.simpleString())
    return out


def test_finalized_hours_are_queryable_at_once(spark, config, traffic):
    manifest, out = load_and_finalize(config, spark)
    assert "warehouse: created table kafka_hourly.page_views" in out, out
    assert "NOT registered" not in out, out
    fs = open_root(config)
    assert warehouse.pending(fs) == []
    expected = produced_by_hour(traffic)
    assert len(expected) == 9  # three topics, three hours
    for (topic, dt, hr), want in expected.items():
        assert fs.exists(layout.success_marker(topic, layout.Hour(dt, hr)))
        assert table_hour(spark, topic, dt, hr) == want, (topic, dt, hr)
    for topic in TOPICS:
        table = f"{DB}.{warehouse.table_name(topic)}"
        detail = {
            r.col_name.strip(): (r.data_type or "").strip()
            for r in spark.sql(f"DESCRIBE FORMATTED {table}").collect()
        }
        assert detail["Type"] == "EXTERNAL"
        assert warehouse.same_location(
            detail["Location"], warehouse.location(fs, layout.topic_dir(topic))
        )
        fmt = "avro" if topic == "clicks" else "parquet"
        assert fmt in detail["Serde Library"].lower()
        # The metadata columns are there, typed as the files hold them.
        row = spark.sql(
            f"SELECT _kafka_partition, _kafka_offset, _kafka_timestamp, _kafka_key, _schema_id,"
            f" header.time AS t FROM {table} LIMIT 1"
        ).first()
        assert row._kafka_offset >= 0 and row._schema_id > 0 and row._kafka_key
        assert row._kafka_timestamp.timestamp() == row.t.timestamp()
    # The whole table is what was produced, and nothing else.
    total = spark.sql(f"SELECT count(*) AS n FROM {DB}.page_views").first().n
    assert total == sum(len(v) for k, v in expected.items() if k[0] == "page-views")


def test_rerun_changes_no_registration(spark, config, traffic):
    before = registrations(spark)
    first = list_runs(open_root(config))[0]
    done = rerun(config, run_id=first, spark=spark, show_progress=False)
    out = io.StringIO()
    _audit_and_finalize(config, open_root(config), done[-1].manifest, out, spark)
    assert "partition(s) registered" in out.getvalue()  # the hours were finalized again
    assert "created" not in out.getvalue() and "evolved" not in out.getvalue()
    assert registrations(spark) == before
    for (topic, dt, hr), want in produced_by_hour(traffic).items():
        assert table_hour(spark, topic, dt, hr) == want
    # Registering again by hand changes nothing either.
    result = warehouse.register_all(config, open_root(config), spark)
    assert not result.failed and not result.created and not result.evolved
    assert registrations(spark) == before


# The schemas the evolution test moves to: a Parquet table and an Avro one.
EVOLVED = {"page-views": "PageViewEvent.v3", "clicks": "ClickEvent"}


def _evolved(schema_name: str) -> dict:
    """The schema plus an optional top-level field and an optional field inside the
    header record: a compatible evolution (BACKWARD) the registry accepts."""
    schema = json.loads(catalog.load_str(schema_name))
    schema["fields"].append({"name": "campaign", "type": ["null", "string"], "default": None})
    header = schema["fields"][0]["type"]
    header["fields"].append({"name": "region", "type": ["null", "string"], "default": None})
    return schema


def test_schema_evolution_adds_columns_old_hours_read_null(spark, config, traffic):
    start = H0 - HOUR_MS  # an hour of its own, not finalized yet
    sent: dict[str, dict] = defaultdict(dict)
    with AuditedProducer(
        config["bootstrap.servers"],
        registry=config["registry.url"],
        service="warehouse",
        emit_interval_s=None,
    ) as producer:
        for topic, schema_name in EVOLVED.items():
            schema = _evolved(schema_name)
            for i, event in enumerate(events(topic, 120, start, start + HOUR_MS, seed=7)):
                event = dict(event, campaign=f"c{i % 3}")
                if topic == "page-views":
                    event["referrer"] = None
                event["header"] = dict(event["header"], region="eu")
                producer.send_avro(
                    topic,
                    event,
                    schema,
                    key=str(event["member_id"]).encode(),
                    timestamp_ms=event["header"]["time"],
                )
                sent[topic][event["header"]["event_id"]] = event
        producer.flush()
    _, out = load_and_finalize(config, spark)
    hour, old = layout.Hour.of_ms(start), layout.Hour.of_ms(H0)
    for topic in EVOLVED:
        table = f"{DB}.{warehouse.table_name(topic)}"
        assert f"warehouse: evolved table {table}" in out, out
        columns = spark.table(table).schema
        assert "campaign" in columns.names
        assert "region" in columns["header"].dataType.names
        new = spark.sql(
            f"SELECT header.event_id AS id, header.region AS region, campaign FROM {table} "
            f"WHERE dt = '{hour.dt}' AND hr = '{hour.hr}'"
        ).collect()
        assert {r.id: (r.campaign, r.region) for r in new} == {
            k: (e["campaign"], "eu") for k, e in sent[topic].items()
        }, topic
        rows = spark.sql(
            f"SELECT header.event_id AS id, header.region AS region, campaign FROM {table} "
            f"WHERE dt = '{old.dt}' AND hr = '{old.hr}'"
        ).collect()
        assert rows and all(r.campaign is None and r.region is None for r in rows), topic
        assert (
            table_hour(spark, topic, old.dt, old.hr)
            == produced_by_hour(traffic)[(topic, old.dt, old.hr)]
        )
    # The other table did not change.
    assert "evolved table kafka_hourly.searches" not in out


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_metastore_down_the_load_commits_and_the_next_run_registers(spark, config, traffic):
    fs = open_root(config)
    runs_before = list_runs(fs)
    traffic.produce(H0 - 3 * HOUR_MS, H0 - 2 * HOUR_MS, per_topic=90)
    overrides = [
        f"bootstrap.servers={','.join(config['bootstrap.servers'])}",
        f"registry.url={config['registry.url']}",
        f"root={config['root']}",
        "per.topic.format=clicks=avro",
        "warehouse.registrar=hive",
        f"warehouse.metastore.uris=thrift://127.0.0.1:{_closed_port()}",
        "spark.master=local[1]",
    ]
    cmd = [sys.executable, "-m", "ingest", "--config", str(ROOT / "conf" / "ingest.yaml")]
    for item in overrides:
        cmd += ["--set", item]
    done = subprocess.run(
        [*cmd, "run"], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    # The data is committed and finalized; the registration is reported in one line, and
    # queued; the exit status says the tables are behind (ingest/cli.py TABLES_BEHIND).
    assert done.returncode == 4, done.stderr[-3000:]
    assert len(list_runs(fs)) == len(runs_before) + 1
    error = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(error) == 1 and "(warehouse.metastore.uris)" in error[0], done.stderr
    assert "no metastore answered at thrift://127.0.0.1:" in error[0]
    assert "Traceback" not in done.stderr
    hours = {
        (topic, layout.Hour.of_ms(e["header"]["time"]))
        for topic, e in traffic.good.values()
        if e["header"]["time"] < H0 - 2 * HOUR_MS
    }
    queued = warehouse.pending(fs)
    assert queued == sorted(layout.partition_dir(t, h) for t, h in hours)
    queue_entry = json.loads(fs.read_bytes(layout.table_pending_file(queued[0])))
    assert "metastore" in queue_entry["error"]
    # The next registration (here the in-process one, with a metastore that is up).
    result = warehouse.register_pending(config, fs, spark)
    assert sorted(result.registered) == queued and not result.failed
    assert warehouse.pending(fs) == []
    expected = produced_by_hour(traffic)
    for topic, hour in hours:
        assert table_hour(spark, topic, hour.dt, hour.hr) == expected[(topic, hour.dt, hour.hr)]


def test_register_all_rebuilds_a_dropped_table(spark, config, traffic):
    before = registrations(spark)
    spark.sql(f"DROP TABLE {DB}.searches")  # external: the files stay
    spark.sql(f"ALTER TABLE {DB}.page_views DROP PARTITION (dt='{layout.Hour.of_ms(H0).dt}')")
    result = warehouse.register_all(config, open_root(config), spark)
    assert not result.failed and result.created == [f"{DB}.searches"]
    assert registrations(spark) == before
    for (topic, dt, hr), want in produced_by_hour(traffic).items():
        assert table_hour(spark, topic, dt, hr) == want


def test_a_table_of_another_root_is_refused(spark, config, tmp_path):
    other = dict(config, root=str(tmp_path / "other-root"))
    fs = open_root(other)
    hour = layout.Hour.of_ms(H0)
    directory = layout.partition_dir("searches", hour)
    fs.write_bytes(f"{directory}/{layout.SUCCESS}", b"{}")
    result = warehouse.register_all(other, fs, spark)
    assert list(result.failed) == [directory]
    assert "exists at" in result.failed[directory]
    assert warehouse.pending(fs) == [directory]


def test_the_queue_names_directories_and_skips_audit_verdicts(config, tmp_path):
    from ingest.fs import LocalFileSystem

    fs = LocalFileSystem(tmp_path / "root")
    hour = layout.Hour("2026-11-22", "03")
    markers = [
        layout.success_marker("page-views", hour),
        layout.success_marker("app.logs_v2", layout.Day("2026-11-22")),
        layout.audit_marker("app-logs", hour),  # ingestion time: no directory finalized
    ]
    queued = warehouse.enqueue(config, fs, markers)
    assert queued == ["data/page-views/dt=2026-11-22/hr=03", "data/app.logs_v2/dt=2026-11-22"]
    assert fs.exists("_tables/pending/page-views+dt=2026-11-22+hr=03")
    assert warehouse.pending(fs) == sorted(queued)
    assert warehouse.enqueue(dict(config, **{"warehouse.registrar": "none"}), fs, markers) == []
    assert warehouse.parse_partition_dir(queued[0]) == (
        "page-views",
        [("dt", "2026-11-22"), ("hr", "03")],
    )
    assert warehouse.table_name("app.logs-V2") == "app_logs_v2"
