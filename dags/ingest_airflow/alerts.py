"""The hourly load's deadline callback.

Airflow's DeadlineAlert runs it (in the triggerer) when a run has not succeeded by its
deadline: the hour it was to load is not loaded and audited in time. It logs one ERROR
line that names the run; a deployment that pages someone swaps in a notifier
(`AsyncCallback(SlackWebhookNotifier, kwargs=...)` and the like) in dags/hourly_load.py.
"""

from __future__ import annotations

import logging

log = logging.getLogger("kafka_hourly.deadline")


def describe_miss(context: dict) -> str:
    run = context.get("dag_run", {})
    deadline = context.get("deadline", {})
    return (
        f"deadline missed: {run.get('dag_id')} run {run.get('run_id') or run.get('dag_run_id')} "
        f"(logical date {run.get('logical_date')}, state {run.get('state')}) had not succeeded "
        f"by {deadline.get('deadline_time')}; the hour it loads is not complete and audited"
    )


async def hourly_load_missed_deadline(context: dict, **_: object) -> str:
    message = describe_miss(context)
    log.error(message)
    return message
