"""Submitting the load to Spark the way Airflow users do: SparkSubmitOperator on the
`spark_default` connection (its host is the master: local[2], yarn, spark://..., k8s://...).

The application is ingest's command line (`ingest/__main__.py`): the Spark driver is then
exactly `python -m ingest ...`, which an operator can also run by hand. Its arguments come
from the upstream task through XCom (the DAG renders templates as native objects, so the
list stays a list).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

import ingest
from ingest_airflow.settings import SPARK_CONN, secret_environment

APPLICATION = str(Path(ingest.__file__).resolve().parent / "__main__.py")


def _environment() -> dict[str, str]:
    """The driver and the executors run this interpreter, so they import ingest, broker and
    schemas from the environment Airflow runs in; spark-submit is the one that ships with its
    pyspark (the first on PATH might belong to another Spark)."""
    bin_dir = os.path.dirname(sys.executable)
    return {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
    }


class IngestSubmitOperator(SparkSubmitOperator):
    """spark-submit with the Kafka connection's secrets added to the driver's environment
    when it runs, never at parse time and never into the rendered (stored) fields."""

    def execute(self, context):
        self.env_vars = {**(self.env_vars or {}), **secret_environment()}
        return super().execute(context)


def submit_ingest(
    task_id: str, args_from: str, key: str = "spark_args", **kwargs
) -> SparkSubmitOperator:
    """A spark-submit of `python -m ingest <args>`; `args_from` is the task id whose XCom
    return value holds the arguments under `key`."""
    return IngestSubmitOperator(
        task_id=task_id,
        conn_id=SPARK_CONN,
        application=APPLICATION,
        application_args=f"{{{{ ti.xcom_pull(task_ids='{args_from}')['{key}'] }}}}",
        name="{{ dag.dag_id }}-{{ run_id }}",
        conf={"spark.ui.enabled": "false", "spark.sql.session.timeZone": "UTC"},
        env_vars=_environment(),
        **kwargs,
    )
