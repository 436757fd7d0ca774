"""meta.properties: which broker and which cluster a log dir belongs to, as Kafka keeps it,
so a log dir is never served by another broker.id or joined to another cluster."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from broker.config.definition import parse_properties
from broker.util.files import write_atomically

META_FILE = "meta.properties"


class LogDirMismatch(RuntimeError):
    """The log dir belongs to another broker or another cluster."""


def new_cluster_id() -> str:
    """A new cluster id, as Kafka makes them: a random UUID in URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def stored_cluster_id(log_dir: Path) -> str | None:
    path = log_dir / META_FILE
    if not path.exists():
        return None
    return parse_properties(path.read_text()).get("cluster.id")


def ensure_meta(log_dir: Path, broker_id: int, cluster_id: str | None = None) -> str:
    """The log dir's cluster id, checked against `broker_id` (and `cluster_id` when
    given); a log dir without meta.properties gets one (with `cluster_id`, or a new id)."""
    path = log_dir / META_FILE
    if path.exists():
        props = parse_properties(path.read_text())
        stored = int(props.get("broker.id", broker_id))
        if stored != broker_id:
            raise LogDirMismatch(
                f"{path} belongs to broker.id {stored}, but this broker is configured as "
                f"broker.id {broker_id}"
            )
        if cluster_id is not None and props["cluster.id"] != cluster_id:
            raise LogDirMismatch(
                f"{path} belongs to cluster {props['cluster.id']}, not to {cluster_id}"
            )
        return props["cluster.id"]
    cluster_id = cluster_id or new_cluster_id()
    write_atomically(path, f"version=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n")
    return cluster_id
