"""Hour compaction (ingest/compact.py): a day of 24 finalized hours x N small files
merged, rows and bytes per CPU second; and a Spark SQL query over one hour before and
after, in the same run.

    .venv/bin/python -m bench.bench_hour_compaction [--files 20] [--rows 3000]
        [--format parquet|avro] [--rounds 5]

Setup: N committed load runs (tests/helpers/compact_runs.py, the load's own record
writers), each one task range of one partition spread over the day, so every hour holds
N files of `--rows` rows (`page` string, `n` long, the `_kafka_*` columns and
`_schema_id`), and `_SUCCESS`. The root is copied before compaction, so the query runs
on both states side by side.

- compaction: `ingest.compact.compact` in this process (no Spark: the CPU is this
  process's, `time.process_time`), planning, reading, writing and the commit included;
  rows and input bytes per CPU second.
- query (Parquet only; pyspark reads Avro only with the spark-avro package): Spark
  local[2], `SELECT count(*), count(DISTINCT _kafka_offset), sum(n), max(length(page))`
  over one hour's directory, before and after, alternating, best of `--rounds` each
  (each query lists the directory and opens every file again: no cache). The two
  answers are compared before any figure is printed.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from ingest import compact, layout
from ingest.config import load_config
from ingest.fs import LocalFileSystem
from tests.helpers.compact_runs import TOPIC, finalize, load_run, run_id

DAY = [layout.Hour("2026-11-22", f"{h:02d}") for h in range(24)]


def build(root: Path, files: int, rows: int, fmt: str) -> tuple[int, int]:
    fs = LocalFileSystem(root)
    per_run = rows * len(DAY)
    for i in range(files):
        load_run(fs, run_id(i + 1), [(0, i * per_run, (i + 1) * per_run)], DAY, fmt)
    finalize(fs, DAY)
    sizes = [
        st.size
        for h in DAY
        for st in fs.list(layout.partition_dir(TOPIC, h))
        if not st.path.endswith("_SUCCESS")
    ]
    return len(sizes), sum(sizes)


def query(spark, directory: Path) -> tuple[float, tuple]:
    started = time.perf_counter()
    spark.read.parquet(str(directory)).createOrReplaceTempView("hour")
    answer = spark.sql(
        "SELECT count(*), count(DISTINCT _kafka_offset), sum(n), max(length(page)) FROM hour"
    ).collect()[0]
    return time.perf_counter() - started, tuple(answer)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=20, help="files per hour")
    parser.add_argument("--rows", type=int, default=3000, help="rows per file")
    parser.add_argument("--format", default="parquet", choices=["parquet", "avro"])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-compact-") as work:
        root, before = Path(work) / "root", Path(work) / "before"
        n_files, n_bytes = build(root, args.files, args.rows, args.format)
        shutil.copytree(root, before)
        config = load_config(None, [f"root={root}", "compaction.lookback.hours=0"])
        cpu, wall = time.process_time(), time.perf_counter()
        result = compact.compact(config, topics=[TOPIC])
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        rows = sum(p.records for p in result.plans)
        out_bytes = sum(w.bytes for w in result.written)
        print(
            f"day: 24 hours x {args.files} files = {n_files} files, {rows:,} rows, "
            f"{n_bytes / 1e6:.1f} MB ({args.format})"
        )
        print(
            f"compaction: {len(result.plans)} outputs ({out_bytes / 1e6:.1f} MB) in "
            f"{cpu:.2f} CPU-s ({wall:.2f} s wall): {rows / cpu:,.0f} rows/CPU-s, "
            f"{n_bytes / cpu / 1e6:.1f} MB/CPU-s of input"
        )
        if args.format != "parquet":
            return
        from ingest.spark_runner import spark_session

        spark = spark_session(
            "local[2]", "bench-compact", {"spark.ui.showConsoleProgress": "false"}
        )
        spark.sparkContext.setLogLevel("ERROR")
        try:
            hour = layout.partition_dir(TOPIC, DAY[12])
            query(spark, before / hour)  # warm the session once
            times = {"before": [], "after": []}
            answers = {}
            for _ in range(args.rounds):
                for name, base in (("before", before), ("after", root)):
                    seconds, answers[name] = query(spark, base / hour)
                    times[name].append(seconds)
            assert answers["before"] == answers["after"], answers
            b, a = min(times["before"]), min(times["after"])
            print(
                f"query over one hour ({answers['after'][0]:,} rows): {args.files} files "
                f"{b * 1000:.0f} ms, 1 file {a * 1000:.0f} ms: {b / a:.2f}x "
                f"(best of {args.rounds})"
            )
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
