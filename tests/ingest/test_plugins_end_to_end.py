"""The plug points end to end, chosen per topic by configuration: a topic of JSON page
views partitioned by event day into Avro files, and a topic of raw bytes partitioned by
ingestion time into Parquet. Real broker, registry, Spark (local[2]) and audited
producers; then the audit, _SUCCESS markers and a rerun.
"""

from __future__ import annotations

import json
from pathlib import Path

import fastavro
import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.processes import ROOT
from broker.util.clock import DAY_MS, now_ms
from ingest import layout
from ingest.audit import audit, finalize, publish_loaded_counts
from ingest.commit import list_runs
from ingest.config import load_config
from ingest.job import open_root, rerun, run_load
from ingest.spark_runner import spark_session
from schemas import catalog
from schemas.audited_producer import AuditedProducer
from schemas.client import RegistryClient
from schemas.samples import events
from schemas.windows import window_start

DAY0 = window_start(now_ms(), DAY_MS) - 2 * DAY_MS  # a whole UTC day, ended a day ago
DT0 = layout.Day.of_ms(DAY0).dt
JSON_TOPIC, RAW_TOPIC = "json-views", "raw-logs"
BAD_EVERY = 25


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]", "plugins-e2e")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def config(broker, registry, tmp_path_factory):
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(JSON_TOPIC, 2), NewTopic(RAW_TOPIC, 1)])
    return load_config(
        ROOT / "conf" / "ingest.yaml",
        [
            f"bootstrap.servers={broker.bootstrap}",
            f"registry.url={registry.url}",
            f"root={tmp_path_factory.mktemp('warehouse')}",
            f"topics.whitelist={JSON_TOPIC},{RAW_TOPIC}",
            f"per.topic.decoder={JSON_TOPIC}=json,{RAW_TOPIC}=raw",
            f"per.topic.partitioner={JSON_TOPIC}=event-day,{RAW_TOPIC}=ingestion-time",
            f"per.topic.format={JSON_TOPIC}=avro",
        ],
    )


@pytest.fixture(scope="module")
def produced(config):
    """JSON page views (every 25th value not JSON) and raw log lines (one tombstone)
    over DAY0, through the audited producer so the audit has producer counts."""
    with RegistryClient(config["registry.url"]) as client:
        schema_id = client.register(f"{JSON_TOPIC}-value", catalog.load_str("PageViewEvent.v3"))
    good, bad, raw = {}, 0, []
    with AuditedProducer(
        config["bootstrap.servers"],
        registry=config["registry.url"],
        service="plugins-e2e",
        emit_interval_s=None,
        linger_ms=5,
    ) as producer:
        for i, event in enumerate(events("page-views", 600, DAY0, DAY0 + DAY_MS, seed=3)):
            ts = event["header"]["time"]
            if i % BAD_EVERY == BAD_EVERY - 1:
                producer.send(JSON_TOPIC, b"<page-view/>", timestamp_ms=ts)
                bad += 1
                continue
            value = json.dumps(event).encode()
            producer.send(JSON_TOPIC, value, key=str(event["member_id"]).encode(), timestamp_ms=ts)
            good[event["header"]["event_id"]] = event
        for i in range(480):
            ts = DAY0 + i * (DAY_MS // 480)
            value = None if i == 7 else f"GET /item/{i} 200".encode()
            producer.send(RAW_TOPIC, value, partition=0, timestamp_ms=ts)
            raw.append(value)
        producer.flush()
    return {"schema_id": schema_id, "good": good, "bad": bad, "raw": raw}


def test_json_by_event_day_into_avro_and_raw_by_ingestion_time_into_parquet(
    spark, config, produced
):
    result = run_load(config, spark=spark, show_progress=False)
    m = result.manifest
    assert m.ledger_balances() and not m.problems()
    root = Path(config["root"])
    parts = {p.topic: [q for q in m.partitions if q.topic == p.topic] for p in m.partitions}

    # JSON: one dt= directory per event day, no hr=, Avro files; bad values quarantined.
    json_parts = parts[JSON_TOPIC]
    assert sum(p.quarantined for p in json_parts) == produced["bad"]
    assert sum(p.loaded for p in json_parts) == len(produced["good"])
    assert {p.schema_ids[0] for p in json_parts} == {produced["schema_id"]}
    rows = []
    for p in json_parts:
        for f in p.files:
            assert (f.dt, f.hr) == (DT0, None)
            assert f.path.startswith(f"data/{JSON_TOPIC}/dt={DT0}/{JSON_TOPIC}+{p.partition}+")
            assert f.path.endswith(f"+{m.run_id}.avro")
            with open(root / f.path, "rb") as data:
                rows += list(fastavro.reader(data))
    assert not list((root / "data" / JSON_TOPIC).glob("*/hr=*"))
    assert {str(r["header"]["event_id"]) for r in rows} == set(produced["good"])
    for r in rows:
        event = produced["good"][str(r["header"]["event_id"])]  # a uuid logical type
        assert r["member_id"] == event["member_id"] and r["page_url"] == event["page_url"]
        assert r["_kafka_key"] == str(event["member_id"]).encode()
        assert r["_schema_id"] == produced["schema_id"]

    # Raw: every value as sent, in the hour the run started, read back by Spark SQL.
    (raw_part,) = parts[RAW_TOPIC]
    run_hour = layout.Hour.of_ms(layout.run_start_ms(m.run_id))
    assert raw_part.quarantined == 0 and raw_part.schema_ids == []
    assert [(f.dt, f.hr) for f in raw_part.files] == [run_hour]
    (raw_file,) = raw_part.files
    assert raw_file.path == layout.data_file(
        RAW_TOPIC, run_hour, 0, 0, len(produced["raw"]), m.run_id, "parquet"
    )
    table = spark.read.parquet(str(root / "data" / RAW_TOPIC)).orderBy("_kafka_offset").collect()
    assert [None if r["value"] is None else bytes(r["value"]) for r in table] == produced["raw"]

    # The audit counts both topics by Kafka timestamp, whatever the decoder or partitioner:
    # the JSON topic per day (its directories), the raw topic per event hour (markers under
    # _audit/, since its directories are not event time).
    fs = open_root(config)
    assert publish_loaded_counts(config, fs, m) == len(m.windows)
    report = audit(config, fs, m.run_id)
    by_topic = {t: [h for h in report.hours if h.topic == t] for t in (JSON_TOPIC, RAW_TOPIC)}
    (day,) = by_topic[JSON_TOPIC]
    assert (day.dt, day.hr, day.period_ms) == (DT0, None, DAY_MS)
    assert day.produced == len(produced["good"]) + produced["bad"]
    assert (day.loaded, day.quarantined) == (len(produced["good"]), produced["bad"])
    assert len(by_topic[RAW_TOPIC]) == 24
    assert all(h.complete for h in report.hours), report.text()
    assert DT0 in report.text()
    finalize(fs, report)
    assert json.loads((root / layout.success_marker(JSON_TOPIC, layout.Day(DT0))).read_text())[
        "complete"
    ]
    for h in by_topic[RAW_TOPIC]:
        marker = root / layout.audit_marker(RAW_TOPIC, layout.Hour(h.dt, h.hr))
        assert json.loads(marker.read_text())["complete"]
    assert not (root / layout.partition_dir(RAW_TOPIC, run_hour) / "_SUCCESS").exists()
    # Audited periods are not audited again.
    assert audit(config, fs).hours == []


def test_rerun_keeps_the_ingestion_time_directory(spark, config, produced):
    fs = open_root(config)
    (original,) = list_runs(fs)
    run_hour = layout.Hour.of_ms(layout.run_start_ms(original))
    (again,) = rerun(config, run_id=original, spark=spark, show_progress=False)
    assert again.manifest.replaces == original
    raw = [f for p in again.manifest.partitions if p.topic == RAW_TOPIC for f in p.files]
    assert [(f.dt, f.hr) for f in raw] == [run_hour]
    root = Path(config["root"])
    assert [p.name for p in (root / layout.partition_dir(RAW_TOPIC, run_hour)).iterdir()] == [
        Path(raw[0].path).name
    ]
    # The day's _SUCCESS went with the replaced files; the audit writes it again.
    assert not (root / layout.success_marker(JSON_TOPIC, layout.Day(DT0))).exists()
    report = audit(config, fs)
    assert [(h.topic, h.dt, h.hr) for h in report.hours] == [(JSON_TOPIC, DT0, None)]
    assert report.hours[0].complete, report.text()
