"""The whole product on embedded defaults, as `./dev demo` runs it:

1. start a three-broker cluster with ZooKeeper (replication factor 3) and the schema
   registry (schemas kept in the cluster's _schemas topic);
2. produce realistic Avro traffic over three event hours with the audited producer,
   two schema versions of page views, and a few undecodable records;
3. run the hourly DAG through Airflow (SQLite metadata, Spark local);
4. show the audit: a text summary and an HTML report with a chart;
5. rerun one stored run through the rerun DAG and show that nothing changed;
6. stop everything cleanly and say where the data, manifests, report and logs are.

The terminal gets a short narrative and one progress line while producing and loading;
everything the servers, Airflow and Spark print goes to log files under var/demo/logs/.
Everything lives under var/demo/, cleared at the start, so the demo runs again and again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from broker.processes import ROOT, Cluster, RegistryProcess, free_port
from broker.util.clock import HOUR_MS, now_ms

WORK = ROOT / "var" / "demo"
LOGS = WORK / "logs"
TOPICS = {"page-views": 3, "searches": 2, "clicks": 1}
PER_TOPIC_PER_HOUR = 4000
STEPS = 6


class StatusLine:
    """Progress on one line. On a terminal the line is rewritten in place; elsewhere (CI, a
    pipe, a file) the first update and then at most one every `interval_s` seconds are
    printed, so a log gets a few lines, not a flood."""

    def __init__(self, out: TextIO, interval_s: float = 10.0) -> None:
        self.out = out
        self.tty = out.isatty()
        self.interval_s = interval_s if not self.tty else 0.1
        self._shown_at: float | None = None
        self._width = 0

    def update(self, text: str) -> None:
        now = time.monotonic()
        if self._shown_at is not None and now - self._shown_at < self.interval_s:
            return
        self._shown_at = now
        if self.tty:
            # Wider than the terminal, the line would wrap and \r could not rewrite it.
            self._draw(f"    {text}"[: shutil.get_terminal_size().columns - 1])
        else:
            print(f"    {text}", file=self.out, flush=True)

    def clear(self) -> None:
        """Before the next line of the narrative: a terminal's progress line is erased."""
        if self._width:
            self._draw("")
        self._shown_at = None

    def _draw(self, text: str) -> None:
        self.out.write("\r" + " " * self._width + "\r" + text)
        self.out.flush()
        self._width = len(text)


def shown(path: Path) -> str:
    """`path` as the user reaches it from where the demo was started."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def produce(
    bootstrap: str, registry_url: str, start_ms: int, status: StatusLine
) -> tuple[int, int]:
    from broker.client.admin import AdminClient, NewTopic
    from schemas import catalog
    from schemas.audited_producer import AuditedProducer
    from schemas.samples import events

    with AdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(t, n) for t, n in TOPICS.items()])
    v1, v3 = catalog.load_str("PageViewEvent.v1"), catalog.load_str("PageViewEvent.v3")
    schemas = {
        "searches": catalog.load_str("SearchEvent"),
        "clicks": catalog.load_str("ClickEvent"),
    }
    total = 3 * PER_TOPIC_PER_HOUR * len(TOPICS)
    good = bad = 0
    with AuditedProducer(
        bootstrap, registry=registry_url, service="demo-frontend", linger_ms=20, compression="lz4"
    ) as producer:
        for topic in TOPICS:
            # Page views switch from schema v1 to v3 half way, as a deploy would.
            for version in (1, 3) if topic == "page-views" else (3,):
                count = 3 * PER_TOPIC_PER_HOUR // (2 if topic == "page-views" else 1)
                span = 3 * HOUR_MS // (2 if topic == "page-views" else 1)
                begin = start_ms + (span if version == 3 and topic == "page-views" else 0)
                for i, event in enumerate(
                    events(
                        topic, count, begin, begin + span, seed=version, page_view_version=version
                    )
                ):
                    ts, key = event["header"]["time"], str(event["member_id"]).encode()
                    if i % 1500 == 1499:  # a buggy client: not Confluent-framed Avro
                        producer.send(
                            topic, b'{"json":"instead of avro"}', key=key, timestamp_ms=ts
                        )
                        bad += 1
                    else:
                        schema = schemas.get(topic) or (v1 if version == 1 else v3)
                        producer.send_avro(topic, event, schema, key=key, timestamp_ms=ts)
                        good += 1
                    if (good + bad) % 500 == 0:
                        status.update(f"{topic}: {good + bad:,} of {total:,} records sent")
        status.update(f"flushing: {good + bad:,} of {total:,} records sent")
        producer.flush()
    status.clear()
    return good, bad


def fingerprint(root: Path) -> tuple[int, str]:
    """Rows and a digest of every loaded record's (topic, partition, offset), via pyarrow."""
    import pyarrow.dataset as ds

    keys = []
    for topic in TOPICS:
        table = ds.dataset(root / "data" / topic, format="parquet", partitioning="hive").to_table(
            columns=["_kafka_partition", "_kafka_offset"]
        )
        keys += [
            (topic, p, o)
            for p, o in zip(table.column(0).to_pylist(), table.column(1).to_pylist(), strict=True)
        ]
    return len(keys), hashlib.sha256(repr(sorted(keys)).encode()).hexdigest()[:16]


def run_dag_here(dag_id: str, conf: dict | None) -> int:
    """In the child process `run_dag` starts: one DAG run through Airflow's dag.test()."""
    from airflow.dag_processing.dagbag import BundleDagBag

    bag = BundleDagBag(dag_folder=str(ROOT / "dags"), bundle_path=ROOT / "dags")
    if bag.import_errors:
        print(f"DAG import errors: {bag.import_errors}", flush=True)
        return 1
    dag = bag.get_dag(dag_id)
    # Airflow 3.3.2's dag.test() crashes pruning the deadline of a successful run (the
    # scheduler does not): the demo runs the DAG without its deadline alert (docs/dags.md).
    dag.deadline = None
    state = str(dag.test(run_conf=conf).state)
    print(f"DAG run state: {state}", flush=True)
    return 0 if state == "success" else 1


# What the progress line shows of a DAG run, from the lines Airflow and the load write.
_TASK_STARTS = re.compile(r"\[DAG TEST\] starting task_id=(\w+)")
_LOAD_PROGRESS = re.compile(r"\[load\] tasks (\d+)/(\d+)\s+records ([\d,]+)")


def run_dag(dag_id: str, conf: dict | None, status: StatusLine) -> tuple[bool, Path, float]:
    """Run one DAG in a child process whose output (Airflow's, spark-submit's and the load's)
    goes to var/demo/logs/<dag_id>.log; follow that log for the progress line.
    Returns (succeeded, the log, seconds)."""
    log_path = LOGS / f"{dag_id}.log"
    args = [sys.executable, "-m", "ingest.demo", "--test-dag", dag_id]
    if conf is not None:
        args += ["--conf", json.dumps(conf)]
    started = time.monotonic()
    with open(log_path, "wb") as log:
        child = subprocess.Popen(
            args, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
    task, detail = "starting Airflow", ""
    with open(log_path, encoding="utf-8", errors="replace") as follow:
        while True:
            done = child.poll() is not None
            for line in follow.readlines():
                if m := _TASK_STARTS.search(line):
                    task, detail = m.group(1), ""
                elif m := _LOAD_PROGRESS.search(line):
                    detail = f": tasks {m.group(1)}/{m.group(2)}, {m.group(3)} records"
            elapsed = time.monotonic() - started
            status.update(f"{dag_id}: {task}{detail} ({elapsed:.0f}s)")
            if done:
                break
            time.sleep(0.2)
    status.clear()
    return child.returncode == 0, log_path, time.monotonic() - started


def tail(path: Path, lines: int = 15) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def configure(bootstrap: str, registry_url: str, root: Path) -> None:
    """The load's config (conf/ingest.yaml pointed at the demo's services) and Airflow's
    settings, in the environment the DAG runs inherit."""
    (WORK / "ingest.yaml").write_text(
        (ROOT / "conf" / "ingest.yaml").read_text()
        + f"\n# demo overrides\nbootstrap.servers: [{bootstrap}]\n"
        f"registry.url: {registry_url}\nroot: {root}\nspark.master: local[2]\n"
    )
    os.environ.update(
        {
            "AIRFLOW_HOME": str(WORK / "airflow"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{WORK / 'airflow' / 'airflow.db'}",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "KAFKA_HOURLY_CONFIG": str(WORK / "ingest.yaml"),
            # The load's spark-submit runs on the spark_default connection: Spark local here
            # (undefined, the Spark provider falls back to yarn).
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        }
    )


CLUSTER_SETTINGS = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    # The last broker to stop has nowhere to move its leaderships: no 5 s waits.
    "controlled.shutdown.retry.backoff.ms": "300",
}


def how_it_ended(code: int) -> str:
    # uvicorn (the registry) re-raises the SIGTERM it handled once it has shut down.
    return f"ended by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"


def main() -> int:
    shutil.rmtree(WORK, ignore_errors=True)
    (WORK / "airflow").mkdir(parents=True)
    LOGS.mkdir()
    root = WORK / "warehouse"
    status = StatusLine(sys.stdout)
    begun = time.monotonic()

    def step(n: int, text: str) -> None:
        print(f"{n}/{STEPS} {text}", flush=True)

    print(
        "kafka-hourly demo on embedded defaults, about a minute "
        f"(what the services, Airflow and Spark print goes to {shown(LOGS)}/)",
        flush=True,
    )
    # Three brokers and ZooKeeper; every topic replicated three times, acks=all writes
    # on at least two replicas. Their data under WORK/broker-<id>, logs under LOGS.
    # Each broker serves Prometheus metrics (broker/metrics/README.md) on a port of its own.
    metrics_ports = {i: free_port() for i in range(3)}
    cluster = Cluster(
        WORK,
        3,
        overrides=CLUSTER_SETTINGS,
        broker_overrides={i: {"metrics.port": str(p)} for i, p in metrics_ports.items()},
    ).start()
    metrics_urls = ", ".join(f"http://127.0.0.1:{p}/metrics" for p in metrics_ports.values())
    bootstrap = cluster.bootstrap
    registry = None
    try:
        registry = RegistryProcess(
            WORK, bootstrap=bootstrap, log_path=LOGS / "registry.log"
        ).start()
        configure(bootstrap, registry.url, root)
        step(
            1,
            f"3 brokers on {bootstrap} with ZooKeeper (controller: broker "
            f"{cluster.controller()}, replication factor 3), schema registry on {registry.url} "
            "(schemas in the cluster's _schemas topic)",
        )
        print(f"    broker metrics (Prometheus): {metrics_urls}", flush=True)

        now = now_ms()
        start = now - now % HOUR_MS - 4 * HOUR_MS  # three whole hours, the last over an hour ago
        hours = (
            time.strftime("%Hh", time.gmtime(start / 1000)),
            time.strftime("%Hh", time.gmtime((start + 2 * HOUR_MS) / 1000)),
        )
        step(
            2,
            f"the audited producer sends event hours {hours[0]}-{hours[1]} UTC: page views "
            "(schema v1, then v3), searches, clicks",
        )
        t = time.monotonic()
        good, bad = produce(bootstrap, registry.url, start, status)
        print(
            f"    sent {good:,} Avro events and {bad} undecodable records in "
            f"{time.monotonic() - t:.0f}s; its monitoring events (counts per window) in _audit",
            flush=True,
        )
        # Airflow's metadata database first (its output, like the DAGs', goes to a log).
        with open(LOGS / "airflow-db.log", "wb") as log:
            subprocess.run(
                [sys.executable, "-m", "airflow", "db", "migrate"],
                check=True,
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

        step(
            3,
            "the hourly DAG kafka_hourly_load through Airflow: plan -> load (Spark local[2]) "
            "-> audit -> finalize",
        )
        ok, log_path, seconds = run_dag("kafka_hourly_load", None, status)

        from ingest.audit import read_report
        from ingest.commit import list_runs, load_manifest
        from ingest.config import load_config
        from ingest.job import open_root
        from ingest.report_html import render

        fs = open_root(load_config(WORK / "ingest.yaml"))
        if not ok or not list_runs(fs):
            print(f"    the DAG run failed; the end of {shown(log_path)}:\n{tail(log_path)}")
            return 1
        manifest = load_manifest(fs, list_runs(fs)[-1])
        loaded = sum(p.loaded for p in manifest.partitions)
        quarantined = sum(p.quarantined for p in manifest.partitions)
        print(
            f"    success in {seconds:.0f}s: run {manifest.run_id} loaded {loaded:,} records "
            f"from {len(manifest.partitions)} partitions, quarantined {quarantined}",
            flush=True,
        )

        step(4, "the audit, written by the DAG's audit task:")
        report = read_report(fs, manifest.run_id)
        print("\n".join(f"    {line}" for line in report.text().splitlines()))
        html_path = WORK / "audit.html"
        html_path.write_text(render(report))
        print(
            f"    {len(report.complete_hours)} of {len(report.hours)} topic-hours complete, "
            f"_SUCCESS written; HTML report with a chart: {shown(html_path)}",
            flush=True,
        )

        rows, digest = fingerprint(root)
        step(5, f"rerunning stored run {manifest.run_id} through kafka_hourly_rerun")
        ok, log_path, seconds = run_dag("kafka_hourly_rerun", {"run_id": manifest.run_id}, status)
        if not ok:
            print(f"    the DAG run failed; the end of {shown(log_path)}:\n{tail(log_path)}")
            return 1
        rows2, digest2 = fingerprint(root)
        newest = load_manifest(fs, list_runs(fs)[-1])
        same = (rows, digest) == (rows2, digest2)
        if same:
            outcome = f"nothing changed ({rows:,} records, digest {digest}, before and after)"
        else:
            outcome = (
                f"CHANGED: {rows:,} records (digest {digest}) before, {rows2:,} ({digest2}) after"
            )
        print(f"    success in {seconds:.0f}s: {outcome}", flush=True)
        print(f"    run {newest.run_id} replaces {newest.replaces}", flush=True)
        code = 0 if same and good == rows else 1
    finally:
        status.clear()
        stopped = []
        if registry is not None:
            stopped.append(f"the registry ({how_it_ended(registry.stop())})")
        codes = cluster.stop()
        stopped.append(
            "the brokers ("
            + ", ".join(f"{i}: {how_it_ended(c)}" for i, c in sorted(codes.items()))
            + ") and ZooKeeper"
        )
        step(STEPS, f"stopped with SIGTERM: {', '.join(stopped)}")

    logs = ", ".join(p.name for p in sorted(LOGS.iterdir()))
    print(f"\nwhere things are (under {shown(WORK)}/, cleared on each run):")
    for what, where in [
        ("data (Parquet, dt=/hr=)", shown(root / "data")),
        ("manifests", shown(root / "history")),
        ("load metrics", f"{shown(root / 'history')}/<run>/metrics.prom, audit.prom"),
        ("broker metrics", f"{metrics_urls} (while the brokers ran)"),
        ("dashboard", "docs/grafana-dashboard.json (Grafana, on a Prometheus scraping them)"),
        ("quarantined records", shown(root / "errors")),
        ("audit report", f"{shown(html_path)} (and history/<run>/audit.json)"),
        ("logs", f"{shown(LOGS)}/: {logs}"),
    ]:
        print(f"  {what:<24} {where}")
    print(f"done in {time.monotonic() - begun:.0f}s", flush=True)
    return code


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ingest.demo", description=__doc__)
    # Internal: the demo runs each DAG in a child process whose output goes to a log file.
    parser.add_argument("--test-dag", help=argparse.SUPPRESS)
    parser.add_argument("--conf", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.test_dag:
        return run_dag_here(args.test_dag, json.loads(args.conf) if args.conf else None)
    return main()


if __name__ == "__main__":
    sys.exit(cli())
