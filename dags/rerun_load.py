"""Rerun stored loads by hand: re-read exactly the offset ranges of committed runs and
replace their files under the commit protocol (`python -m ingest rerun`, through Spark).

Trigger with exactly one of: `run_id` (a stored run), `ranges` (["topic:partition:first:next",
...]: every stored run overlapping them), or `time_from` + `time_to` (event time, ISO 8601
UTC: every stored run overlapping the offsets of that time range).
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pendulum
from airflow.sdk import Param, dag, task
from airflow.sdk.exceptions import AirflowFailException
from ingest_airflow import assets, runs, settings
from ingest_airflow.spark import submit_ingest

from ingest import layout
from ingest.commit import load_manifest
from ingest.job import open_root

log = logging.getLogger(__name__)

RANGE_PATTERN = r"^.+:[0-9]+:[0-9]+:[0-9]+$"


def _rerun_args(params: dict) -> list[str]:
    """`python -m ingest rerun` arguments for exactly one way of naming what to rerun."""
    named = [
        bool(params.get("run_id")),
        bool(params.get("ranges")),
        bool(params.get("time_from") or params.get("time_to")),
    ]
    if sum(named) != 1:
        raise AirflowFailException(
            "name exactly one of: run_id, ranges, time_from + time_to (got "
            f"{ {k: params.get(k) for k in ('run_id', 'ranges', 'time_from', 'time_to')} })"
        )
    if params.get("run_id"):
        return ["rerun", "--run", params["run_id"]]
    if params.get("ranges"):
        return ["rerun", *[a for r in params["ranges"] for a in ("--range", r)]]
    if not (params.get("time_from") and params.get("time_to")):
        raise AirflowFailException("a time range needs both time_from and time_to")
    return ["rerun", "--from", params["time_from"], "--to", params["time_to"]]


@dag(
    dag_id="kafka_hourly_rerun",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    default_args={
        "retries": 2,
        "retry_delay": timedelta(minutes=1),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=10),
    },
    params={
        "run_id": Param(None, type=["null", "string"], description="A stored run id"),
        "ranges": Param(
            [],
            type="array",
            items={"type": "string", "pattern": RANGE_PATTERN},
            description="Offset ranges topic:partition:first:next",
        ),
        "time_from": Param(None, type=["null", "string"], description="Event time from (UTC)"),
        "time_to": Param(None, type=["null", "string"], description="Event time to (UTC)"),
    },
    tags=["kafka-hourly"],
    doc_md=__doc__,
)
def kafka_hourly_rerun():
    @task
    def prepare(params=None) -> dict:
        resolved = settings.resolve()
        args = _rerun_args(params)
        baseline = runs.newest_run(open_root(resolved.load()))
        log.info("rerun %s; newest committed run before it: %s", args[1:], baseline)
        return {
            "settings": {"config_path": resolved.config_path, "overrides": resolved.overrides},
            "baseline": baseline,
            "spark_args": [*resolved.cli_args(), *args],
        }

    @task(outlets=[assets.ALIAS])
    def verify(prepared: dict, outlet_events=None) -> list[dict]:
        """Each rerun re-read exactly its stored ranges and balances; count changes (a
        decoder fix turns quarantined records into loaded ones) are logged. Complete hours
        whose files were replaced get a new Asset event: their data changed."""
        config = settings.Settings(**prepared["settings"]).load()
        fs = open_root(config)
        reruns = runs.runs_after(fs, prepared["baseline"], kind="rerun")
        if not reruns:
            raise AirflowFailException("the rerun committed nothing")
        summary, problems, hours = [], [], {}
        for new in reruns:
            old = load_manifest(fs, new.replaces)
            problems += [f"{new.run_id}: {p}" for p in runs.compare_rerun(old, new)]
            for line in runs.count_changes(old, new) or ["counts unchanged"]:
                log.info("%s replaced %s: %s", new.run_id, old.run_id, line)
            summary.append({"run_id": new.run_id, "replaces": old.run_id})
            for p in new.partitions:
                for f in p.files:
                    marker = layout.success_marker_beside(f.path)
                    if (p.topic, f.dt, f.hr) not in hours and fs.exists(marker):
                        hours[(p.topic, f.dt, f.hr)] = (fs.read_bytes(marker), new)
        if problems:
            raise AirflowFailException(
                "rerun does not match the stored runs:\n" + "\n".join(problems)
            )
        for report, new in hours.values():
            assets.emit_hours(
                outlet_events,
                [runs.hour_report(report)],
                fs.uri(),
                run_id=new.run_id,
                rerun_of=new.replaces,
            )
        return summary

    prepared = prepare()
    rerun = submit_ingest("rerun", args_from="prepare")
    prepared >> rerun >> verify(prepared)


kafka_hourly_rerun()
