"""Checks of the load's surroundings before anything heavy starts (Spark, a run lock), so a
newcomer's mistake -- a broker, registry or metastore that does not answer, a root that
cannot be written, a topic whitelist that matches nothing -- is one line naming what and
where (the configuration key), not a traceback from deep inside a run
(docs/contracts/hdfs-load.md, "Errors"). The CLI prints ``Unusable`` as that line and
exits 2; the DAG's plan task fails with it.
"""

from __future__ import annotations

import os
import socket
import uuid
from typing import Any
from urllib.parse import urlsplit

from broker.client.admin import AdminClient
from ingest.config import kafka_security
from ingest.plan import select_topics
from ingest.plugins import TopicPlugins
from schemas.client import RegistrySettings

TIMEOUT_S = 5.0


class Unusable(Exception):
    """Something the load needs is not there; the message is the one line to show.
    ``retryable``: a service that may come back (the DAG retries), not a mistake in the
    settings (the DAG fails at once)."""

    def __init__(self, message: str, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def check_brokers(config: dict[str, Any]) -> list[str]:
    """The cluster's topics, or Unusable when no bootstrap broker answers."""
    bootstrap = ",".join(config["bootstrap.servers"])
    try:
        with AdminClient(
            config["bootstrap.servers"],
            request_timeout_ms=int(TIMEOUT_S * 1000),
            security=kafka_security(config),
        ) as admin:
            return admin.list_topics()
    except Exception as exc:
        raise Unusable(
            f"no broker answered at {bootstrap} (bootstrap.servers): {first_line(exc)}"
        ) from exc


def check_topics(config: dict[str, Any], topics: list[str]) -> list[str]:
    """The topics the load selects, or Unusable when the whitelist selects none."""
    selected = select_topics(topics, config["topics.whitelist"], config["topics.blacklist"])
    if selected:
        return selected
    visible = [t for t in topics if not t.startswith("_")]
    sample = ", ".join(visible[:5]) + (f" and {len(visible) - 5} more" if len(visible) > 5 else "")
    raise Unusable(
        f"topics.whitelist {config['topics.whitelist']} (less topics.blacklist "
        f"{config['topics.blacklist']}) matches none of the {len(topics)} topic(s) at "
        f"{','.join(config['bootstrap.servers'])}" + (f": {sample}" if sample else ""),
        retryable=False,
    )


def check_registry(config: dict[str, Any], topics: list[str] | None = None) -> None:
    """Unusable when a registry the topics' decoders need does not answer."""
    if topics is not None and not TopicPlugins.from_config(config).registry_subjects(topics):
        return
    settings = RegistrySettings.from_config(config)
    try:
        with settings.client(timeout=TIMEOUT_S) as registry:
            registry.subjects()
    except Exception as exc:
        raise Unusable(
            f"the schema registry at {settings.url} (registry.url) does not answer: "
            f"{first_line(exc)}"
        ) from exc


def check_root(config: dict[str, Any], write: bool = True) -> None:
    """Unusable when the root cannot be listed (and, with ``write``, written). Roots that
    Hadoop's API reaches (hdfs://, or root.filesystem: hadoop) need a JVM, which only the
    run starts: the run checks them itself."""
    from ingest.job import open_root

    root = config["root"]
    scheme = urlsplit(root).scheme
    if config["root.filesystem"] == "hadoop" or scheme not in ("", "file", "webhdfs", "swebhdfs"):
        return
    try:
        fs = open_root(config)
        fs.list("")
        if write:
            probe = f".ingest-preflight-{uuid.uuid4().hex[:8]}"
            fs.write_bytes(probe, b"")
            fs.delete(probe)
    except Exception as exc:
        raise Unusable(f"the root {root} (root) is not usable: {first_line(exc)}") from exc


def check_metastore(config: dict[str, Any]) -> None:
    """Unusable when tables are kept and no metastore answers: an external one must accept
    a connection on one of its thrift URIs; the embedded one needs a writable directory."""
    if config["warehouse.registrar"] != "hive":
        return
    uris = config["warehouse.metastore.uris"]
    if not uris:
        derby = os.path.abspath(config["warehouse.metastore.derby.dir"])
        try:
            os.makedirs(derby, exist_ok=True)
            if not os.access(derby, os.W_OK):
                raise PermissionError(f"{derby} is not writable")
        except OSError as exc:
            raise Unusable(
                f"the embedded metastore's directory {derby} (warehouse.metastore.derby.dir) "
                f"is not usable: {first_line(exc)}"
            ) from exc
        return
    errors = []
    for uri in uris.split(","):
        parts = urlsplit(uri.strip())
        try:
            with socket.create_connection((parts.hostname, parts.port or 9083), TIMEOUT_S):
                return
        except (OSError, ValueError, TypeError) as exc:
            errors.append(first_line(exc))
    raise Unusable(
        f"no metastore answered at {uris} (warehouse.metastore.uris): {'; '.join(errors)}"
    )


def check_sources(config: dict[str, Any], *, select: bool) -> list[str]:
    """Brokers, then (with ``select``) the whitelist, then the registry: what a run or an
    audit needs before it starts Spark. Returns the selected topics (all with ``select``
    off)."""
    topics = check_brokers(config)
    if select:
        topics = check_topics(config, topics)
    check_registry(config, topics if select else None)
    return topics
