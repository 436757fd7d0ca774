"""A Spark standalone cluster on this machine: one master and N workers, started as an
operator starts them (``spark-class org.apache.spark.deploy.master.Master`` /
``...deploy.worker.Worker``, with the ``spark-class`` of the pyspark in this environment),
bound to the loopback. The tests and bench/bench_ingest.py submit the load to it through
``spark-submit`` exactly as the DAG does.

Python applications run on standalone in client deploy mode only (Spark refuses
``--deploy-mode cluster`` for Python on a standalone master), so the driver is the
``spark-submit`` process and the executors are the workers' children.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from broker.processes import HOST, free_port


def spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def spark_env() -> dict[str, str]:
    """The environment of Spark's processes: loopback only, this interpreter for Python."""
    bin_dir = os.path.dirname(sys.executable)
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": HOST,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
    }


class StandaloneCluster:
    """``with StandaloneCluster(workdir, workers=2) as cluster:`` then submit to
    ``cluster.master_url``. Each worker offers ``cores`` cores and ``memory`` to executors."""

    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.workdir = Path(workdir)
        self.n_workers, self.cores, self.memory = workers, cores, memory
        self.port, self.ui_port = free_port(), free_port()
        self.master_url = f"spark://{HOST}:{self.port}"
        self.master: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 (the child holds it)
        try:
            return subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                env=spark_env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: stop() takes its executors too
            )
        finally:
            log.close()

    def start_worker(self) -> subprocess.Popen:
        i = len(self.workers)
        work = self.workdir / f"worker-{i}"
        work.mkdir(parents=True, exist_ok=True)
        proc = self._start(
            f"worker-{i}",
            "org.apache.spark.deploy.worker.Worker",
            "--host", HOST,
            "--cores", str(self.cores),
            "--memory", self.memory,
            "--webui-port", str(free_port()),
            "--work-dir", str(work),
            self.master_url,
        )  # fmt: skip
        self.workers.append(proc)
        return proc

    def state(self) -> dict:
        """The master's JSON status (workers, applications)."""
        url = f"http://{HOST}:{self.ui_port}/json/"
        with urllib.request.urlopen(url, timeout=2) as response:
            return json.load(response)

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.state()["workers"] if w["state"] == "ALIVE")
        except (OSError, ValueError):  # not listening yet; or still starting: an empty page
            return 0

    def wait_for_workers(self, n: int, timeout_s: float = 90.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.alive_workers() < n:
            for proc in [self.master, *self.workers]:
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited; see {self.workdir}/*.log")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{n} workers not registered; see {self.workdir}/*.log")
            time.sleep(0.5)

    def __enter__(self) -> StandaloneCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.master = self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", HOST,
            "--port", str(self.port),
            "--webui-port", str(self.ui_port),
        )  # fmt: skip
        try:
            for _ in range(self.n_workers):
                self.start_worker()
            self.wait_for_workers(self.n_workers)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for proc in [*self.workers, self.master]:
            if proc is None or proc.poll() is not None:
                continue
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def __exit__(self, *exc) -> None:
        self.stop()


def submit_command(master: str, args: list[str], conf: dict[str, str] | None = None) -> list[str]:
    """spark-submit of `python -m ingest <args>` in client mode, as dags/ingest_airflow/spark.py
    has the SparkSubmitOperator build it."""
    import ingest

    command = [str(spark_home() / "bin" / "spark-submit"), "--master", master]
    command += ["--deploy-mode", "client"]
    for key, value in {
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        **(conf or {}),
    }.items():
        command += ["--conf", f"{key}={value}"]
    return [*command, str(Path(ingest.__file__).resolve().parent / "__main__.py"), *args]
