"""Compaction after a real load: broker, registry, Spark (local[2]) with the embedded
Hive metastore, the load, audit, finalize and registration as the CLI runs them
(fixtures of test_warehouse.py: a Parquet table and an Avro one), then compaction on
Spark tasks, a rerun of a compacted hour, and the tables queried after each step."""

from __future__ import annotations

import io
import json

from broker.util.clock import HOUR_MS
from ingest import compact, layout
from ingest.cli import _audit_and_finalize
from ingest.commit import list_runs, load_manifest
from ingest.job import open_root, rerun
from tests.ingest.test_end_to_end import H0, TOPICS
from tests.ingest.test_warehouse import (  # noqa: F401  (fixtures)
    config,
    load_and_finalize,
    produced_by_hour,
    registrations,
    spark,
    table_hour,
    traffic,
)


def data_files(fs, topic, dt, hr):
    return compact.data_files(fs, layout.partition_dir(topic, layout.Hour(dt, hr)))


def test_compacted_hours_keep_their_rows_tables_and_reruns(spark, config, traffic):  # noqa: F811
    # Two loads into the same hours, so each compacted file holds rows of both.
    load_and_finalize(config, spark)
    traffic.produce(H0, H0 + 3 * HOUR_MS, per_topic=150)
    load_and_finalize(config, spark)
    fs = open_root(config)
    hours = produced_by_hour(traffic)
    assert all(len(data_files(fs, *key)) >= 2 for key in hours)  # small files to merge
    tables = registrations(spark)

    result = compact.compact(config, topics=sorted(TOPICS), spark=spark)
    assert result.manifest is not None and not result.skipped
    assert {p.directory for p in result.plans} == {
        layout.partition_dir(t, layout.Hour(dt, hr)) for t, dt, hr in hours
    }
    for (topic, dt, hr), want in hours.items():
        assert len(data_files(fs, topic, dt, hr)) == 1
        assert table_hour(spark, topic, dt, hr) == want  # every row once, through the table
        marker = json.loads(fs.read_bytes(layout.success_marker(topic, layout.Hour(dt, hr))))
        assert marker["compactions"][0]["run_id"] == result.run_id
    assert registrations(spark) == tables

    # A rerun of the first load replaces exactly its rows: each compacted file is
    # written again with the second load's rows only, in the rerun's commit.
    load = list_runs(fs)[0]
    done = rerun(config, run_id=load, spark=spark, show_progress=False)
    rewritten = done[-1].manifest.compacted
    assert {c.inputs[0] for c in rewritten} == {c.path for c in result.manifest.compacted}
    second = load_manifest(fs, list_runs(fs)[1])
    kept = [(p.topic, p.partition, p.first, p.next) for p in second.partitions]
    for c in rewritten:
        topic = c.path.split("/")[1]
        assert all(
            any(
                t == topic and q == r.partition and a <= r.first and r.next <= b
                for t, q, a, b in kept
            )
            for r in c.ranges
        )
    _audit_and_finalize(config, fs, done[-1].manifest, io.StringIO(), spark)
    for (topic, dt, hr), want in hours.items():
        assert table_hour(spark, topic, dt, hr) == want
    assert load_manifest(fs, done[-1].run_id).replaces == load
