"""The load reads a compacted topic: it loads the survivors only, and its ledger counts
the offsets compaction removed as skipped (next - first = loaded + quarantined +
skipped), so the partition balances with gaps inside its range."""

from __future__ import annotations

import time

from broker.client.admin import AdminClient, NewTopic
from broker.client.simple_consumer import SimpleConsumer
from broker.processes import ROOT, RegistryProcess
from broker.records.batch import iter_records
from broker.util.clock import MINUTE_MS, now_ms
from ingest.config import load_config
from ingest.job import run_load
from ingest.spark_runner import spark_session
from schemas import catalog
from schemas.audited_producer import AuditedProducer
from schemas.samples import events

TOPIC = "page-state"


def survivors(bootstrap: str, end: int) -> list[int]:
    """The offsets a reader of the partition gets back below `end`."""
    offsets, position = [], 0
    with SimpleConsumer(bootstrap) as consumer:
        while position < end:
            result = consumer.fetch(TOPIC, 0, position)
            offsets += [r.offset for r in iter_records(result.records_bytes, position)]
            position = result.next_offset
    return [o for o in offsets if o < end]


def test_the_ledger_counts_compaction_gaps_as_skipped(broker_factory, tmp_path):
    b = broker_factory({"log.cleaner.backoff.ms": "100", "log.segment.delete.delay.ms": "0"})
    registry = RegistryProcess(tmp_path, bootstrap=b.bootstrap).start()
    try:
        with AdminClient(b.bootstrap) as admin:
            admin.create_topics(
                [
                    NewTopic(
                        TOPIC,
                        1,
                        configs={
                            "cleanup.policy": "compact",
                            "segment.bytes": "4096",
                            "segment.ms": "200",
                            "min.cleanable.dirty.ratio": "0.01",
                        },
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
        start = now_ms() - 30 * MINUTE_MS
        with AuditedProducer(
            b.bootstrap, registry=registry.url, service="t", emit_interval_s=None, linger_ms=0
        ) as producer:
            for i, event in enumerate(events("page-views", 120, start, start + MINUTE_MS, seed=3)):
                key = b"page-%d" % (i % 12)  # twelve pages, each updated ten times
                producer.send_avro(
                    TOPIC, event, schema, key=key, timestamp_ms=event["header"]["time"]
                ).result(10)
                if i % 40 == 39:
                    time.sleep(0.3)  # past segment.ms: the next send rolls the segment
        # Wait for the cleaner to finish: few survivors, and no change for a second.
        deadline = time.monotonic() + 30
        previous, kept = None, survivors(b.bootstrap, 120)
        while (len(kept) > 60 or kept != previous) and time.monotonic() < deadline:
            time.sleep(1)
            previous, kept = kept, survivors(b.bootstrap, 120)
        assert len(kept) <= 60, "the cleaner compacted the sealed segments"
        spark = spark_session("local[1]", "compacted")
        try:
            manifest = run_load(config, spark=spark, show_progress=False).manifest
        finally:
            spark.stop()
        (p,) = [p for p in manifest.partitions if p.topic == TOPIC]
        assert (p.first, p.next) == (0, 120)
        assert p.loaded == len(kept)
        assert p.skipped == 120 - p.loaded - p.quarantined > 0
        assert p.balances() and not p.problems()
    finally:
        registry.stop()
