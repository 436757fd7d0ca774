"""Running the map tasks on Spark and showing progress while they load.

One Spark partition per TaskSpec, so Spark schedules (and on failure retries) each
range independently; every attempt stages its own files (see task.py), and only the
results Spark collects -- those of the attempts that finished -- are committed.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ingest.plan import TaskSpec
from ingest.task import TaskResult, TaskSettings, run_task

# The load's JVMs only hand tasks to Python workers and results back (the driver's also
# plans and commits, through py4j): the JIT's C1 compiler and the serial collector are
# enough, and cost far less CPU on the cores the tasks need (docs/benchmarks.md, "Two
# standalone workers against one": executors with them, two workers' warm rounds 3.4-5.1
# -> 3.0-3.5 s; a driver with them, a new application's driver JVM used 10.7-11.1 s of
# CPU instead of 21.3-22.2 s). Used unless the submission or the session sets its own
# options; the driver's only where this process starts the driver JVM.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _under_spark_submit() -> bool:
    """Whether spark-submit started this driver (and so its JVM, before any session)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def submitted_conf(key: str) -> str | None:
    """`key` as spark-submit was given it (``--conf``, spark-defaults.conf) when this
    driver runs under spark-submit; None otherwise, or when it was not given."""
    if not _under_spark_submit():
        return None  # no spark-submit: the session's conf is all there is
    from pyspark import SparkConf, SparkContext

    # Under spark-submit the JVM exists already: connecting to it loses no setting, and
    # a SparkConf then reads spark-submit's settings from it.
    SparkContext._ensure_initialized()
    return SparkConf().get(key)


def _starts_driver_jvm() -> bool:
    """Whether building a session here starts the driver's JVM (so its options still
    count): not under spark-submit, and no JVM from an earlier session of this process."""
    from pyspark import SparkContext

    return not _under_spark_submit() and SparkContext._gateway is None


def spark_session(master: str, app_name: str, extra_conf: dict[str, str] | None = None):
    """A session for the load. Executors are Python workers of this same interpreter, so
    they import our packages from the same environment."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.task.maxFailures", "4")
        # Tasks are I/O-and-Python bound, one range each; no shuffle.
        .config("spark.default.parallelism", "2")
        # Executors' Python workers start faster (see the module).
        .config("spark.python.daemon.module", "ingest.spark_daemon")
    )
    extra_conf = dict(extra_conf or {})
    if "spark.executor.extraJavaOptions" not in extra_conf and not submitted_conf(
        "spark.executor.extraJavaOptions"
    ):
        extra_conf["spark.executor.extraJavaOptions"] = JVM_OPTIONS
    if _starts_driver_jvm():
        extra_conf.setdefault("spark.driver.extraJavaOptions", JVM_OPTIONS)
    for key, value in extra_conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _run_on_executor(settings: TaskSettings, records_acc, bytes_acc, tasks_acc):
    def run(specs):
        from pyspark import TaskContext

        attempt = TaskContext.get().attemptNumber()
        for spec in specs:
            result = run_task(spec, settings, attempt)
            records_acc.add(result.loaded + result.quarantined)
            bytes_acc.add(result.bytes_read)
            tasks_acc.add(1)
            yield result

    return run


@dataclass(frozen=True)
class Counts:
    """Where a run's tasks stand. `done`, `records` and `bytes` come from accumulators,
    which executors send with each finished task (so they count whole tasks, on any
    master); `running` and `failed` (attempts that died and are retried) from Spark's
    status tracker, which follows the attempts as the scheduler sees them."""

    done: int
    records: int
    bytes: int
    running: int = 0
    failed: int = 0


class Progress:
    """Prints tasks done, records, bytes and the rate every few seconds while tasks run."""

    def __init__(
        self,
        total_tasks: int,
        counters: Callable[[], Counts],
        out=sys.stderr,
        interval_s: float = 2.0,
    ) -> None:
        self.total = total_tasks
        self.counters = counters
        self.out = out
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="load-progress")
        self.started = time.monotonic()

    def line(self) -> str:
        c = self.counters()
        elapsed = max(time.monotonic() - self.started, 1e-9)
        failed = f"  {c.failed} failed attempt(s) retried" if c.failed else ""
        return (
            f"[load] tasks {c.done}/{self.total} ({c.running} running)  records "
            f"{c.records:,}  {c.bytes / 1e6:,.1f} MB  {c.records / elapsed:,.0f} rec/s  "
            f"{c.bytes / 1e6 / elapsed:,.1f} MB/s  {elapsed:,.0f}s{failed}"
        )

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            print(self.line(), file=self.out, flush=True)

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        print(self.line(), file=self.out, flush=True)


def _stage_counts(sc, group: str) -> tuple[int, int]:
    """(running, failed) task attempts of the job group's stages."""
    tracker = sc.statusTracker()
    running = failed = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job else ():
            stage = tracker.getStageInfo(stage_id)
            if stage:
                running += stage.numActiveTasks
                failed += stage.numFailedTasks
    return running, failed


def run_tasks(
    spark, tasks: list[TaskSpec], settings: TaskSettings, show_progress: bool = True
) -> list[TaskResult]:
    # Here, not at the top: executors import this module to run _run_on_executor.
    from ingest.fs.hadoop import CONF_PROPERTY, spark_hadoop_conf

    if not tasks:
        return []
    sc = spark.sparkContext
    records_acc, bytes_acc, tasks_acc = sc.accumulator(0), sc.accumulator(0), sc.accumulator(0)
    rdd = sc.parallelize(tasks, len(tasks)).mapPartitions(
        _run_on_executor(settings, records_acc, bytes_acc, tasks_acc)
    )
    group = f"load-{settings.run_id}"
    sc.setJobGroup(group, f"load {settings.run_id}: {len(tasks)} ranges")
    # Tasks reaching a Hadoop root through their own JVM configure it as the driver's.
    sc.setLocalProperty(CONF_PROPERTY, json.dumps(spark_hadoop_conf(spark)))
    if not show_progress:
        return rdd.collect()

    def counts() -> Counts:
        running, failed = _stage_counts(sc, group)
        return Counts(tasks_acc.value, records_acc.value, bytes_acc.value, running, failed)

    with Progress(len(tasks), counts):
        return rdd.collect()
