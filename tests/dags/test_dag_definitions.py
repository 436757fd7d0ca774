"""The DAG files import cleanly and declare the scheduling the product promises."""

from __future__ import annotations

from datetime import timedelta

import pytest


def test_dags_import_without_errors(dagbag):
    assert dagbag.import_errors == {}
    assert {"kafka_hourly_load", "kafka_hourly_rerun"} <= set(dagbag.dag_ids)


def test_helper_package_is_not_parsed_as_dags(dagbag):
    assert not any("ingest_airflow" in path for path in dagbag.file_last_changed)


def test_hourly_load_schedule(dagbag):
    dag = dagbag.get_dag("kafka_hourly_load")
    assert dag.timetable.expression == "0 * * * *"  # @hourly
    assert dag.timetable.can_be_scheduled
    assert dag.max_active_runs == 1
    assert dag.catchup is False
    order = [t.task_id for t in dag.topological_sort()]
    assert order[:4] == ["plan", "load", "audit", "finalize"]
    assert set(order[4:]) == {"register", "compaction_wanted", "compact"}
    assert order.index("compaction_wanted") < order.index("compact")
    for task in dag.tasks:
        assert task.retries == 3
        assert task.retry_exponential_backoff
        assert task.max_retry_delay == timedelta(minutes=15)


def test_hourly_load_submits_spark_and_gates_on_the_audit(dagbag):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    dag = dagbag.get_dag("kafka_hourly_load")
    load = dag.get_task("load")
    assert isinstance(load, SparkSubmitOperator)
    assert load.application.endswith("ingest/__main__.py")
    assert "xcom_pull(task_ids='plan')" in load.application_args
    # finalize runs whatever the audit's verdict, and publishes through the alias
    finalize = dag.get_task("finalize")
    assert finalize.trigger_rule == "all_done"
    assert [o.name for o in finalize.outlets] == ["kafka-hourly"]
    # then the finalized hours' partitions go into their tables, in Spark
    register = dag.get_task("register")
    assert isinstance(register, SparkSubmitOperator)
    assert "xcom_pull(task_ids='plan')['register_args']" in register.application_args
    assert register.upstream_task_ids == {"finalize"}
    # compaction after the audit gate, only for the topics compaction.topics names
    compact = dag.get_task("compact")
    assert isinstance(compact, SparkSubmitOperator)
    assert "xcom_pull(task_ids='plan')['compact_args']" in compact.application_args
    assert compact.upstream_task_ids == {"compaction_wanted"}
    assert dag.get_task("compaction_wanted").upstream_task_ids == {"finalize", "plan"}


def test_hourly_load_deadline_alert(dagbag):
    from airflow.sdk import AsyncCallback, DeadlineReference

    dag = dagbag.get_dag("kafka_hourly_load")
    alerts = dag.deadline if isinstance(dag.deadline, list) else [dag.deadline]
    assert len(alerts) == 1
    alert = alerts[0]
    assert alert.reference == DeadlineReference.DAGRUN_LOGICAL_DATE
    assert alert.interval == timedelta(minutes=50)
    assert isinstance(alert.callback, AsyncCallback)
    assert alert.callback.path == "ingest_airflow.alerts.hourly_load_missed_deadline"


def test_rerun_is_manual_with_params(dagbag):
    dag = dagbag.get_dag("kafka_hourly_rerun")
    assert not dag.timetable.can_be_scheduled  # schedule=None: triggered by hand only
    assert dag.max_active_runs == 1
    assert set(dag.params) == {"run_id", "ranges", "time_from", "time_to"}
    assert [t.task_id for t in dag.topological_sort()] == ["prepare", "rerun", "verify"]


@pytest.mark.parametrize(
    "params, args",
    [
        ({"run_id": "r1", "ranges": []}, ["rerun", "--run", "r1"]),
        (
            {"ranges": ["a:0:1:5", "b:1:0:3"]},
            ["rerun", "--range", "a:0:1:5", "--range", "b:1:0:3"],
        ),
        (
            {"time_from": "2026-01-01T00:00Z", "time_to": "2026-01-01T02:00Z", "ranges": []},
            ["rerun", "--from", "2026-01-01T00:00Z", "--to", "2026-01-01T02:00Z"],
        ),
    ],
)
def test_rerun_arguments(dagbag, params, args):
    from rerun_load import _rerun_args

    assert _rerun_args(params) == args


@pytest.mark.parametrize(
    "params",
    [{}, {"run_id": "r1", "ranges": ["a:0:1:5"]}, {"time_from": "2026-01-01T00:00Z"}],
)
def test_rerun_refuses_ambiguous_params(dagbag, params):
    from airflow.sdk.exceptions import AirflowFailException
    from rerun_load import _rerun_args

    with pytest.raises(AirflowFailException):
        _rerun_args(params)
