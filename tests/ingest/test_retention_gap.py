"""Retention deletes offsets between two runs: the gap is recorded in the manifest and the
audit, and loading continues from the log start."""

from __future__ import annotations

import time

from broker.client.admin import AdminClient, NewTopic
from broker.client.simple_consumer import SimpleConsumer
from broker.processes import ROOT, RegistryProcess
from broker.util.clock import HOUR_MS, MINUTE_MS, now_ms
from ingest.audit import audit
from ingest.config import load_config
from ingest.job import open_root, run_load
from ingest.spark_runner import spark_session
from schemas import catalog
from schemas.audited_producer import AuditedProducer
from schemas.samples import events


def test_gap_is_recorded_and_loading_continues(broker_factory, tmp_path):
    b = broker_factory(
        {"log.retention.check.interval.ms": "200", "log.segment.delete.delay.ms": "0"}
    )
    registry = RegistryProcess(tmp_path, bootstrap=b.bootstrap).start()
    try:
        with AdminClient(b.bootstrap) as admin:
            # Small segments, retention by size: about 20 KB stay.
            admin.create_topics(
                [
                    NewTopic(
                        "aging", 1, configs={"segment.bytes": "4096", "retention.bytes": "20000"}
                    )
                ]
            )
        config = load_config(
            ROOT / "conf" / "ingest.yaml",
            [
                f"bootstrap.servers={b.bootstrap}",
                f"registry.url={registry.url}",
                f"root={tmp_path / 'wh'}",
                "spark.master=local[1]",
            ],
        )
        schema = catalog.load_str("PageViewEvent.v3")
        now = now_ms()

        def produce(start_ms: int, count: int, seed: int) -> None:
            with AuditedProducer(
                b.bootstrap, registry=registry.url, service="t", emit_interval_s=None, linger_ms=0
            ) as producer:
                for e in events("page-views", count, start_ms, start_ms + MINUTE_MS, seed=seed):
                    producer.send_avro("aging", e, schema, timestamp_ms=e["header"]["time"]).result(
                        10
                    )

        spark = spark_session("local[1]", "gap")
        try:
            produce(now - HOUR_MS, 50, 0)  # loaded by the first run
            first = run_load(config, spark=spark, show_progress=False).manifest
            assert [(p.first, p.next) for p in first.partitions] == [(0, 50)]
            produce(
                now - 30 * MINUTE_MS, 130, 1
            )  # more than retention keeps: the oldest go unloaded
            with SimpleConsumer(b.bootstrap) as consumer:
                deadline = time.monotonic() + 20
                while consumer.earliest_offset("aging", 0) <= 50 and time.monotonic() < deadline:
                    time.sleep(0.2)
                log_start = consumer.earliest_offset("aging", 0)
            assert 50 < log_start < 180, log_start
            second = run_load(config, spark=spark, show_progress=False).manifest
        finally:
            spark.stop()
        (p,) = second.partitions
        assert (p.gap.from_offset, p.gap.to_offset) == (50, log_start)
        assert (p.first, p.next) == (log_start, 180)
        assert p.loaded == 180 - log_start and p.balances()
        report = audit(config, open_root(config))
        assert report.gaps == {"aging": log_start - 50}
        assert "lost" in report.text()
    finally:
        registry.stop()
