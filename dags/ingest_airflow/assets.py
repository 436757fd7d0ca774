"""The Assets the DAGs emit: one per complete topic-hour (topic-day for a topic with the
event-day partitioner).

Topics are chosen by regular expressions at run time, so the Assets cannot be listed when
the DAG is parsed; the finalize task declares the alias `kafka-hourly` as its outlet and
attaches one Asset per hour it finalizes. A downstream DAG schedules on the hour it needs,
`Asset("kafka-hourly://<topic>/dt=YYYY-MM-DD/hr=HH")` (`.../dt=YYYY-MM-DD` for a day), or
on the alias for every hour.
"""

from __future__ import annotations

from collections.abc import Callable

from airflow.sdk import Asset, AssetAlias

from ingest import layout

ALIAS = AssetAlias("kafka-hourly")


def hour_uri(topic: str, dt: str, hr: str | None) -> str:
    return f"kafka-hourly://{topic}/dt={dt}" + ("" if hr is None else f"/hr={hr}")


def _directory(h: dict) -> str:
    """Where the period's data is: the directory of its _SUCCESS, or for a topic whose
    directories are not event time (the marker is under _audit/), the topic's."""
    marker = h.get("marker") or layout.success_marker(h["topic"], layout.Hour(h["dt"], h["hr"]))
    if f"/{layout.AUDIT_MARKERS}/" in marker:
        return layout.topic_dir(h["topic"])
    return marker.rsplit("/", 1)[0]


def hour_asset(topic: str, dt: str, hr: str | None) -> Asset:
    uri = hour_uri(topic, dt, hr)
    return Asset(uri=uri, name=uri)


def emit_hours(
    outlet_events,
    hours: list[dict],
    root: str,
    table_of: Callable[[str], str | None] = lambda topic: None,
    **extra,
) -> list[str]:
    """Attach an asset event per hour (dicts of HourReport.to_dict()) to the alias; the
    extra tells a consumer where the hour is, its table (``db.table``, when the load keeps
    tables) and what the audit counted."""
    uris = []
    for h in hours:
        asset = hour_asset(h["topic"], h["dt"], h["hr"])
        table = table_of(h["topic"])
        outlet_events[ALIAS].add(
            asset,
            extra={
                "topic": h["topic"],
                "dt": h["dt"],
                "hr": h["hr"],
                "path": f"{root.rstrip('/')}/{_directory(h)}",
                "produced": h["produced"],
                "loaded": h["loaded"],
                "quarantined": h["quarantined"],
                # Late data: a changed hour gets a new event with the next revision.
                "revision": h.get("revision", 1),
                "late": h.get("late", 0),
                **({"table": table} if table else {}),
                **extra,
            },
        )
        uris.append(asset.uri)
    return uris
