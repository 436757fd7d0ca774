"""The load end to end: real broker, real registry, real Spark with executors in separate
processes (local-cluster), audited producers, several topics, hours and schema versions.

One module so the Spark application (slow to start) is shared; the tests run in order and
build on each other: load, incremental load, crashes, rerun.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.processes import ROOT
from broker.util.clock import HOUR_MS, now_ms
from ingest import layout
from ingest.commit import list_runs, load_manifest
from ingest.config import load_config
from ingest.job import CRASH_ENV, open_root, rerun, run_load
from ingest.spark_runner import spark_session
from ingest.task import FAULTS_ENV
from schemas import catalog
from schemas.audited_producer import AuditedProducer
from schemas.samples import events

NOW = now_ms()
# Three whole event hours, ending more than an hour ago (so late-record grace has passed).
H0 = NOW - NOW % HOUR_MS - 5 * HOUR_MS
TOPICS = {"page-views": 3, "searches": 2, "clicks": 1}


@pytest.fixture(scope="module")
def faults(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="module")
def spark(faults):
    # Executors get the fault directory through Spark's conf: they inherit the environment
    # of the JVM, which an earlier test module may have started before this one.
    session = spark_session(
        "local-cluster[2,1,1024]", "e2e", {f"spark.executorEnv.{FAULTS_ENV}": str(faults)}
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def topics_and_config(broker, registry, root, *overrides: str) -> dict:
    """TOPICS created on the broker; the load's config for them onto `root`."""
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(t, n) for t, n in TOPICS.items()])
    return load_config(
        ROOT / "conf" / "ingest.yaml",
        [
            f"bootstrap.servers={broker.bootstrap}",
            f"registry.url={registry.url}",
            f"root={root}",
            *overrides,
        ],
    )


@pytest.fixture(scope="module")
def config(broker, registry, tmp_path_factory):
    return topics_and_config(
        broker,
        registry,
        tmp_path_factory.mktemp("warehouse"),
        "limits.max.records.per.task=700",  # several tasks per partition
    )


class Traffic:
    """What was produced, by event id, to compare the output with record by record."""

    # The audited producer's options (a subclass may want smaller batches, say).
    producer_options = {"linger_ms": 5}

    def __init__(self, config) -> None:
        self.config = config
        self.good: dict[str, dict] = {}  # event_id -> event, for decodable records
        self.bad = 0
        self.batches = 0

    def producer(self) -> AuditedProducer:
        """The producing application: the load's brokers and registry (a subclass may
        produce as another principal)."""
        return AuditedProducer(
            self.config["bootstrap.servers"],
            registry=self.config["registry.url"],
            service="e2e",
            emit_interval_s=None,
            **self.producer_options,
        )

    def produce(self, start_ms: int, end_ms: int, per_topic: int, bad_every: int = 0) -> None:
        seed = self.batches
        self.batches += 1
        schemas = {
            "searches": catalog.load_str("SearchEvent"),
            "clicks": catalog.load_str("ClickEvent"),
        }
        v1, v3 = catalog.load_str("PageViewEvent.v1"), catalog.load_str("PageViewEvent.v3")
        with self.producer() as producer:
            for topic in TOPICS:
                for i, event in enumerate(
                    events(
                        topic,
                        per_topic,
                        start_ms,
                        end_ms,
                        seed=seed,
                        page_view_version=1 if seed == 0 else 3,
                    )
                ):
                    ts = event["header"]["time"]
                    key = str(event["member_id"]).encode()
                    if bad_every and i % bad_every == bad_every - 1:
                        producer.send(
                            topic, b"\x00\x00\x00\x00\x07garbage", key=key, timestamp_ms=ts
                        )
                        self.bad += 1
                        continue
                    schema = schemas.get(topic) or (v1 if seed == 0 and i % 2 == 0 else v3)
                    if topic == "page-views" and schema is v3:
                        event = dict(event, referrer=event.get("referrer"))
                    producer.send_avro(topic, event, schema, key=key, timestamp_ms=ts)
                    self.good[event["header"]["event_id"]] = (topic, event)
            producer.flush()


@pytest.fixture(scope="module")
def traffic(config):
    t = Traffic(config)
    # v1 page views first: the registry (BACKWARD) accepts v1 then v3.
    t.produce(H0, H0 + 3 * HOUR_MS, per_topic=1500, bad_every=97)
    return t


def read_output(spark, config) -> dict[str, list]:
    """Every row under the root, by topic; with spark=None read by pyarrow (rows as dicts)."""
    out = {}
    for topic in TOPICS:
        path = Path(config["root"]) / "data" / topic
        if not path.exists():
            out[topic] = []
        elif spark is None:
            out[topic] = pq.read_table(path, partitioning="hive").to_pylist()
        else:
            out[topic] = spark.read.parquet(str(path)).collect()
    return out


def assert_output_is_exactly(spark, config, traffic) -> None:
    output = read_output(spark, config)
    seen = {}
    for topic, rows in output.items():
        for row in rows:
            event_id = row["header"]["event_id"]
            assert event_id not in seen, f"duplicate record {event_id}"
            seen[event_id] = (topic, row)
    assert set(seen) == set(traffic.good), (len(seen), len(traffic.good))
    for event_id, (topic, row) in seen.items():
        want_topic, event = traffic.good[event_id]
        assert topic == want_topic
        assert row["member_id"] == event["member_id"]
        assert int(row["header"]["time"].timestamp() * 1000) == event["header"]["time"]
        assert row["_kafka_key"] == str(event["member_id"]).encode()
        if topic == "page-views":
            assert row["page_url"] == event["page_url"]
            assert row["referrer"] == event.get("referrer")  # v1 rows read as the default (null)


def test_load_end_to_end(spark, config, traffic):
    result = run_load(config, spark=spark, show_progress=False)
    m = result.manifest
    assert m.ledger_balances() and not m.problems()
    assert sum(p.quarantined for p in m.partitions) == traffic.bad
    assert sum(p.loaded for p in m.partitions) == len(traffic.good)
    assert_output_is_exactly(spark, config, traffic)
    # Hive-style partitions: three event hours per topic.
    hours = {(f.dt, f.hr) for p in m.partitions for f in p.files}
    assert len(hours) == 3
    # The audit: every hour complete, _SUCCESS written.
    from ingest.audit import audit, finalize, publish_loaded_counts, write_report

    fs = open_root(config)
    assert publish_loaded_counts(config, fs, m) == len(m.windows)
    report = audit(config, fs, m.run_id)
    write_report(fs, report)
    assert len(report.hours) == 9 and all(h.complete for h in report.hours), report.text()
    finalize(fs, report)
    for topic in TOPICS:
        for dt, hr in hours:
            marker = Path(config["root"]) / layout.success_marker(topic, layout.Hour(dt, hr))
            assert json.loads(marker.read_text())["complete"] is True


def test_the_run_metrics_parse_and_match_its_manifest(config, traffic, tmp_path):
    """The committed run's metrics file (next to its manifest), parsed by prometheus_client,
    says what the manifest says; the audit's gives the newest complete hour."""
    from ingest import metrics
    from ingest.audit import audit
    from tests.helpers.metrics import Scrape, dashboard_series

    fs = open_root(config)
    run = list_runs(fs)[-1]
    m = load_manifest(fs, run)
    text = fs.read_bytes(f"{layout.history_dir(run)}/{metrics.LOAD_FILE}").decode()
    scrape = Scrape(text)
    for topic in TOPICS:
        parts = [p for p in m.partitions if p.topic == topic]
        assert scrape.value("ingest_run_records", topic=topic) == sum(p.loaded for p in parts)
        assert scrape.value("ingest_run_quarantined_records", topic=topic) == sum(
            p.quarantined for p in parts
        )
        assert scrape.value("ingest_run_skipped_offsets", topic=topic) == sum(
            p.skipped for p in parts
        )
        assert scrape.value("ingest_run_gap_offsets", topic=topic) == 0
        assert scrape.value("ingest_run_written_bytes", topic=topic) == sum(
            f.bytes for p in parts for f in p.files
        )
        # Nothing was produced during the run: it started that far behind, and ended level.
        assert scrape.value("ingest_lag_start_offsets", topic=topic) == sum(
            p.next - p.first for p in parts
        )
        assert scrape.value("ingest_lag_end_offsets", topic=topic) == 0
        assert scrape.value("ingest_run_tasks", topic=topic) >= len(parts)
        assert scrape.value("ingest_run_task_seconds_max", topic=topic) > 0
        assert scrape.value("ingest_run_decode_records_per_second", topic=topic) > 0
    assert (
        sum(scrape.value("ingest_run_quarantined_records", topic=t) for t in TOPICS) == traffic.bad
    )
    committed = scrape.value("ingest_last_committed_run_timestamp_seconds", run=run)
    assert abs(committed - layout.run_start_ms(run) / 1000) < 600

    # The audit (the first test finalized every hour): the newest complete hour per topic,
    # written to the textfile collector's directory as configured.
    report = audit(config, fs, run)
    textfiles = tmp_path / "textfile"
    where = metrics.publish(
        {**config, "metrics.textfile.dir": str(textfiles)},
        fs,
        run,
        "audit",
        metrics.audit_metrics(report, fs, TOPICS),
    )
    assert str(textfiles / "kafka_hourly_audit.prom") in where
    audited = Scrape((textfiles / "kafka_hourly_audit.prom").read_text())
    newest = {layout.Hour(f.dt, f.hr) for p in m.partitions for f in p.files}
    for topic in TOPICS:
        assert (
            audited.value("ingest_last_complete_hour_timestamp_seconds", topic=topic)
            == max(h.start_ms for h in newest) / 1000
        )
    # Every ingest_* series the dashboard queries is in one of the two files.
    asked = dashboard_series("ingest_")
    assert asked and asked <= set(scrape.samples) | set(audited.samples)


def test_status_shows_the_cluster_the_registry_the_run_and_the_hours(config, capsys):
    """`python -m ingest status` on what the tests before left: one broker, the registry,
    the committed run, every hour complete."""
    from ingest.cli import main

    fs = open_root(config)
    run = list_runs(fs)[-1]
    m = load_manifest(fs, run)
    overrides = [
        f"bootstrap.servers={config['bootstrap.servers'][0]}",
        f"registry.url={config['registry.url']}",
        f"root={config['root']}",
    ]
    args = ["--config", str(ROOT / "conf" / "ingest.yaml")]
    for override in overrides:
        args += ["--set", override]
    assert main([*args, "status"]) == 0
    screen = capsys.readouterr().out
    assert "\033[" not in screen  # not a terminal: no colour
    assert "1 broker(s) 0; controller 0" in screen
    assert "0 under-replicated" in screen and "0 offline" in screen
    assert f"{config['registry.url']}: leader" in screen
    assert f"last run {run} (load)" in screen
    newest = max((f.dt, f.hr) for p in m.partitions for f in p.files)
    for topic in TOPICS:
        assert f"{topic}: complete up to {newest[0]} {newest[1]}h" in screen
    assert len(screen.splitlines()) <= 40, screen  # one screen


def test_incremental_load_adds_only_new_records(spark, config, traffic):
    before = list_runs(open_root(config))
    traffic.produce(H0 + 3 * HOUR_MS, H0 + 4 * HOUR_MS, per_topic=300)
    result = run_load(config, spark=spark, show_progress=False)
    assert result.manifest.previous_run == before[-1]
    assert sum(p.loaded for p in result.manifest.partitions) == 900
    assert_output_is_exactly(spark, config, traffic)


def test_task_attempt_killed_mid_range_is_retried(spark, config, traffic, faults):
    traffic.produce(H0 + 3 * HOUR_MS, H0 + 4 * HOUR_MS, per_topic=400)
    (faults / "kill-task-once").write_text("armed")
    result = run_load(config, spark=spark, show_progress=False)
    armed = (faults / "kill-task-once").exists()
    (faults / "kill-task-once").unlink(missing_ok=True)  # never leave it armed for later tests
    assert not armed and (faults / "task-killed").exists(), "a task attempt died"
    assert max(r.attempt for r in result.results) >= 1
    assert result.manifest.ledger_balances()
    assert_output_is_exactly(spark, config, traffic)


def _driver(config, crash_at: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "ingest", "--config", str(ROOT / "conf" / "ingest.yaml")]
    for key in ("bootstrap.servers", "registry.url", "root"):
        value = config[key]
        args += ["--set", f"{key}={','.join(value) if isinstance(value, list) else value}"]
    args += ["--set", "spark.master=local[2]", "run", "--no-audit"]
    env = {k: v for k, v in os.environ.items() if k != FAULTS_ENV}
    return subprocess.run(
        args,
        cwd=ROOT,
        env={**env, CRASH_ENV: crash_at},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize("crash_at", ["before-commit", "mid-moves"])
def test_driver_killed_then_next_run_is_exact(spark, config, traffic, crash_at):
    runs_before = list_runs(open_root(config))
    traffic.produce(H0 + 3 * HOUR_MS, H0 + 4 * HOUR_MS, per_topic=200)
    died = _driver(config, crash_at)
    assert died.returncode == -9, died.stderr[-3000:]
    root = Path(config["root"])
    if crash_at == "before-commit":
        assert list_runs(open_root(config)) == runs_before
    else:
        assert any((root / "_runs").glob("*/COMMITTED")), "crashed after the commit point"
    result = run_load(config, spark=spark, show_progress=False)
    if crash_at == "mid-moves":
        assert len(result.recovered.rolled_forward) == 1
    assert not any((root / "_runs").iterdir()), "no staging left behind"
    assert_output_is_exactly(spark, config, traffic)
    for run in list_runs(open_root(config)):
        assert load_manifest(open_root(config), run).ledger_balances()


def test_rerun_of_a_stored_run_is_identical_and_idempotent(spark, config, traffic):
    fs = open_root(config)
    first = list_runs(fs)[0]
    original = load_manifest(fs, first)
    (r1,) = rerun(config, run_id=first, spark=spark, show_progress=False)
    assert r1.manifest.replaces == first
    assert [
        (p.topic, p.partition, p.first, p.next, p.loaded, p.quarantined)
        for p in r1.manifest.partitions
    ] == [
        (p.topic, p.partition, p.first, p.next, p.loaded, p.quarantined)
        for p in original.partitions
    ]
    assert_output_is_exactly(spark, config, traffic)
    (r2,) = rerun(config, run_id=first, spark=spark, show_progress=False)  # again: replaces r1
    assert r2.manifest.replaces == r1.run_id
    assert_output_is_exactly(spark, config, traffic)
    # The audit still balances after reruns (counts come from the live manifests only).
    from ingest.audit import audit

    report = audit(config, fs)
    assert report.incomplete_hours == [] or all(
        h.partitions_past is False for h in report.incomplete_hours
    )
