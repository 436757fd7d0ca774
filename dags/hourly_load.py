"""The hourly load: plan -> load (spark-submit of `python -m ingest run`) -> audit -> finalize
-> register (spark-submit of `python -m ingest register`: the finalized hours' partitions
in their warehouse tables, when `warehouse.registrar` keeps tables); after finalize also
compaction_wanted -> compact (spark-submit of `python -m ingest compact`, for the topics
`compaction.topics` names; skipped when it names none).

Scheduling only; the load, the audit and _SUCCESS are ingest's (docs/dags.md).
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pendulum
from airflow.sdk import AsyncCallback, DeadlineAlert, DeadlineReference, Variable, dag, task
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException
from ingest_airflow import assets, gate, runs, settings
from ingest_airflow import metrics as airflow_metrics
from ingest_airflow.alerts import hourly_load_missed_deadline
from ingest_airflow.spark import submit_ingest
from prometheus_client import generate_latest

from broker.config.definition import ConfigError
from ingest import audit as ingest_audit
from ingest import layout, preflight, warehouse
from ingest import metrics as ingest_metrics
from ingest.job import open_root

log = logging.getLogger(__name__)

# The run for the tick at T loads up to T; it must succeed before the next tick, or the
# deadline callback fires (a run still running or failed then has not loaded in time).
RUN_DEADLINE = timedelta(minutes=50)


@dag(
    dag_id="kafka_hourly_load",
    schedule="@hourly",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,  # one load per root at a time (the run lock would refuse a second)
    render_template_as_native_obj=True,  # spark-submit's arguments stay a list
    default_args={
        "retries": 3,
        "retry_delay": timedelta(minutes=1),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=15),
    },
    deadline=DeadlineAlert(
        reference=DeadlineReference.DAGRUN_LOGICAL_DATE,
        interval=RUN_DEADLINE,
        callback=AsyncCallback(hourly_load_missed_deadline),
    ),
    tags=["kafka-hourly"],
    doc_md=__doc__,
)
def kafka_hourly_load():
    @task
    def plan() -> dict:
        """Resolve the settings once for the whole run and note the newest committed run,
        so the later tasks find the run this load commits."""
        resolved = settings.resolve()
        try:
            config = resolved.load()
        except ConfigError as exc:  # retrying does not fix a configuration
            raise AirflowFailException(f"{resolved.config_path}: {exc}") from None
        try:  # the brokers, the whitelist, the registry and the root, before spark-submit
            preflight.check_sources(config, select=True)
            preflight.check_root(config)
        except preflight.Unusable as exc:  # a service may come back; a whitelist will not
            raise (AirflowException if exc.retryable else AirflowFailException)(str(exc)) from None
        baseline = runs.newest_run(open_root(config))
        log.info(
            "config %s, overrides %s; newest committed run before this load: %s",
            resolved.config_path,
            resolved.overrides,
            baseline,
        )
        return {
            "settings": {"config_path": resolved.config_path, "overrides": resolved.overrides},
            "baseline": baseline,
            # The audit is its own task, so the job does not audit.
            "spark_args": [*resolved.cli_args(), "run", "--no-audit"],
            "register_args": [*resolved.cli_args(), "register"],
            "compact_args": [*resolved.cli_args(), "compact"],
        }

    @task
    def audit(planned: dict, ti=None) -> dict:
        """The gate: fails when an hour is still incomplete past its deadline, skips when
        some hour is not complete yet, succeeds when every audited hour is complete. The
        report is in the log and in history/<run>/audit.json (its path in XCom) either way."""
        config = settings.Settings(**planned["settings"]).load()
        fs = open_root(config)
        loads = runs.runs_after(fs, planned["baseline"], kind="load")
        if not loads:
            raise AirflowFailException("the load task succeeded but committed no run")
        manifest = loads[-1]
        run_metrics = f"{layout.history_dir(manifest.run_id)}/{ingest_metrics.LOAD_FILE}"
        if fs.exists(run_metrics):  # written by the load after its commit
            airflow_metrics.report(fs.read_bytes(run_metrics).decode())
        if config["audit.publish"]:
            ingest_audit.publish_loaded_counts(config, fs, manifest)
        report = ingest_audit.audit(config, fs, manifest.run_id)
        path = ingest_audit.write_report(fs, report)
        log.info("audit report %s\n%s", fs.uri(path), report.text())
        data = report.to_dict()
        # finalize reads the report back from the root: it acts on exactly what was audited.
        ti.xcom_push(key="report_path", value=path)
        deadline = gate.deadline_from(Variable.get(gate.DEADLINE_VARIABLE, default=None))
        verdict = gate.judge(data["hours"], report.generated_at_ms, deadline)
        if verdict.late:
            late = ", ".join(f"{h['topic']} {h['dt']} {h['hr']}h" for h in verdict.late)
            raise AirflowFailException(
                f"{verdict.summary()} ({deadline} after the hour): {late}\n{report.text()}"
            )
        if verdict.waiting:
            raise AirflowSkipException(f"{verdict.summary()}; the next run audits them again")
        return {"run_id": manifest.run_id, "report": fs.uri(path), "summary": verdict.summary()}

    @task(trigger_rule="all_done", outlets=[assets.ALIAS])
    def finalize(planned: dict, ti=None, outlet_events=None) -> list[str]:
        """_SUCCESS and an Asset event for every hour the audit found complete, whatever
        its verdict on the others: one late hour must not hold back the rest. An hour that
        late data re-opened gets its next revision and a new event, so downstream DAGs
        scheduled on it run again. The hours are queued for their tables, which the
        register task (in Spark) fills."""
        path = ti.xcom_pull(task_ids="audit", key="report_path")
        if not path:
            raise AirflowFailException("no audit report: the load or the audit failed")
        config = settings.Settings(**planned["settings"]).load()
        fs = open_root(config)
        data = json.loads(fs.read_bytes(path))
        report = gate.report_from_dict(data)
        done = ingest_audit.finalize(fs, report)
        # The verdict's metrics, once the _SUCCESS markers are written (ingest/metrics.py).
        loads = runs.runs_after(fs, planned["baseline"], kind="load")
        topics = {p.topic for m in loads[-1:] for p in m.partitions}
        registry = ingest_metrics.audit_metrics(report, fs, topics)
        ingest_metrics.publish(config, fs, data["run_id"], "audit", registry)
        airflow_metrics.report(generate_latest(registry).decode())
        warehouse.enqueue(config, fs, [h.marker for h in done])
        uris = assets.emit_hours(
            outlet_events,
            [h.to_dict() for h in done],
            fs.uri(),
            table_of=warehouse.table_of(config),
            run_id=data["run_id"],
        )
        log.info("_SUCCESS written for %d hour(s): %s", len(uris), uris)
        return uris

    @task.short_circuit
    def compaction_wanted(planned: dict) -> bool:
        """Compaction is per topic by configuration (compaction.topics): none named, no
        spark-submit at all."""
        return bool(settings.Settings(**planned["settings"]).load()["compaction.topics"])

    planned = plan()
    load = submit_ingest("load", args_from="plan")
    register = submit_ingest("register", args_from="plan", key="register_args")
    finalized = finalize(planned)
    planned >> load >> audit(planned) >> finalized >> register
    compact = submit_ingest("compact", args_from="plan", key="compact_args")
    finalized >> compaction_wanted(planned) >> compact


kafka_hourly_load()
