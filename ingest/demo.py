"""The whole product on embedded defaults, as `./dev demo` runs it:

1. start a broker and the schema registry (schemas kept in the broker's _schemas topic);
2. produce realistic Avro traffic over three event hours with the audited producer,
   two schema versions of page views, and a few undecodable records;
3. run the hourly DAG through Airflow (SQLite metadata, Spark local);
4. show the audit: a text summary and an HTML report with a chart;
5. rerun one stored run through the rerun DAG and show that nothing changed;
6. stop everything cleanly and say where the data, manifests and report are.

Everything lives under var/demo/, cleared at the start, so the demo runs again and again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "var" / "demo"
HOUR = 3_600_000
TOPICS = {"page-views": 3, "searches": 2, "clicks": 1}
PER_TOPIC_PER_HOUR = 4000


def say(text: str) -> None:
    print(f"\n== {text}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """A product service in its own process, stopped with SIGTERM (a clean shutdown)."""

    def __init__(self, name: str, args: list[str], port: int) -> None:
        self.name, self.port = name, port
        self.log = WORK / f"{name}.log"
        self.proc = subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not start; see {self.log}") from None
                time.sleep(0.1)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)


def produce(bootstrap: str, registry_url: str, start_ms: int) -> tuple[int, int]:
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
    good = bad = 0
    with AuditedProducer(
        bootstrap, registry=registry_url, service="demo-frontend", linger_ms=20, compression="lz4"
    ) as producer:
        for topic in TOPICS:
            # Page views switch from schema v1 to v3 half way, as a deploy would.
            for version in (1, 3) if topic == "page-views" else (3,):
                count = 3 * PER_TOPIC_PER_HOUR // (2 if topic == "page-views" else 1)
                span = 3 * HOUR // (2 if topic == "page-views" else 1)
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
                        continue
                    schema = schemas.get(topic) or (v1 if version == 1 else v3)
                    producer.send_avro(topic, event, schema, key=key, timestamp_ms=ts)
                    good += 1
        producer.flush()
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


def run_dag(dag_id: str, conf: dict | None = None) -> str:
    from airflow.dag_processing.dagbag import BundleDagBag

    bag = BundleDagBag(dag_folder=str(ROOT / "dags"), bundle_path=ROOT / "dags")
    if bag.import_errors:
        raise RuntimeError(f"DAG import errors: {bag.import_errors}")
    dag = bag.get_dag(dag_id)
    # Airflow 3.3.2's dag.test() crashes pruning the deadline of a successful run (the
    # scheduler does not): the demo runs the DAG without its deadline alert (docs/dags.md).
    dag.deadline = None
    run = dag.test(run_conf=conf)
    return str(run.state)


def main() -> int:
    shutil.rmtree(WORK, ignore_errors=True)
    (WORK / "airflow").mkdir(parents=True)
    root = WORK / "warehouse"
    kafka_port, registry_port = free_port(), free_port()
    bootstrap, registry_url = f"127.0.0.1:{kafka_port}", f"http://127.0.0.1:{registry_port}"
    (WORK / "registry.properties").write_text(
        f"listeners={registry_url}\nkafkastore.type=kafka\nkafkastore.bootstrap.servers={bootstrap}\n"
    )
    (WORK / "ingest.yaml").write_text(
        (ROOT / "conf" / "ingest.yaml").read_text()
        + f"\n# demo overrides\nbootstrap.servers: [{bootstrap}]\nregistry.url: {registry_url}\nroot: {root}\n"
        "spark.master: local[2]\n"
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

    say(f"starting the broker on {bootstrap} and the schema registry on {registry_url}")
    broker = Service(
        "broker",
        [
            "-m",
            "broker",
            "start",
            "conf/server.properties",
            "--override",
            f"listeners=PLAINTEXT://{bootstrap}",
            "--override",
            f"log.dirs={WORK / 'kafka-logs'}",
        ],
        kafka_port,
    )
    registry = None
    try:
        registry = Service(
            "registry",
            ["-m", "schemas.registry", "start", str(WORK / "registry.properties")],
            registry_port,
        )
        now = int(time.time() * 1000)
        start = now - now % HOUR - 4 * HOUR  # three whole hours, the last ended over an hour ago
        say(
            "producing three event hours of page views, searches and clicks with the audited producer"
        )
        good, bad = produce(bootstrap, registry_url, start)
        print(
            f"produced {good:,} Avro events and {bad} undecodable records; monitoring events in _audit"
        )

        say("preparing Airflow (SQLite metadata database)")
        subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"],
            check=True,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        say("running the hourly DAG (kafka_hourly_load): plan -> load -> audit -> finalize")
        state = run_dag("kafka_hourly_load")
        print(f"DAG run finished: {state}")

        from ingest.audit import read_report
        from ingest.commit import list_runs, load_manifest
        from ingest.config import load_config
        from ingest.job import open_root
        from ingest.report_html import render

        config = load_config(WORK / "ingest.yaml")
        fs = open_root(config)
        if not list_runs(fs):
            raise RuntimeError(
                f"the hourly DAG committed no run; see the Airflow log above ({state})"
            )
        manifest = load_manifest(fs, list_runs(fs)[-1])
        say("the audit (written by the DAG's audit task)")
        report = read_report(fs, manifest.run_id)
        print(report.text())
        html_path = WORK / "audit.html"
        html_path.write_text(render(report))
        print(f"HTML report with the chart: {html_path}")
        print(
            f"{len(report.complete_hours)} of {len(report.hours)} topic-hours complete, _SUCCESS written"
        )

        rows, digest = fingerprint(root)
        say(f"rerunning stored run {manifest.run_id} through kafka_hourly_rerun")
        state = run_dag("kafka_hourly_rerun", {"run_id": manifest.run_id})
        print(f"DAG run finished: {state}")
        rows2, digest2 = fingerprint(root)
        newest = load_manifest(fs, list_runs(fs)[-1])
        same = (rows, digest) == (rows2, digest2)
        print(
            f"before the rerun: {rows:,} records (digest {digest}); after: {rows2:,} (digest {digest2}) -> "
            f"{'nothing changed' if same else 'CHANGED'}; {newest.run_id} replaces {newest.replaces}"
        )
        say("where things are")
        print(f"data (Parquet, dt=/hr= partitions): {root / 'data'}")
        print(f"manifests: {root / 'history'}")
        print(f"quarantined records: {root / 'errors'}")
        print(f"audit report: {html_path} (and history/<run>/audit.json)")
        return 0 if same and good == rows else 1
    finally:
        say("stopping the registry and the broker")
        if registry is not None:
            registry.stop()
        code = broker.stop()
        print(f"broker exited with {code}; logs in {WORK}")


if __name__ == "__main__":
    sys.exit(main())
