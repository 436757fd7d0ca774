"""Settings of a load as seen from Airflow: conf/ingest.yaml, overridden by Connections.

Deployments keep endpoints and credentials in Airflow Connections (secrets backends,
the UI, AIRFLOW_CONN_* variables), not in files next to the DAGs. Every task resolves
the settings the same way and hands the overrides to the job as `--set key=value`, so
the Spark driver and the in-worker audit see one configuration.

The registry's URL, and `ssl.*` extras as `registry.ssl.*`, come from its connection; its
login and password are the basic-auth secret `registry.basic.auth.user.info`, handled like
the Kafka password below.

Kafka security comes from the `kafka_default` connection's extras, in the Kafka
provider's (librdkafka's) names: `security.protocol`, `sasl.mechanism`, `sasl.username`
(or the login), `ssl.ca.location`, ... become `kafka.*` overrides. The secrets (the
connection's password or `sasl.password` extra, `ssl.key.password`) never become
overrides: they would be in XCom, the logs and spark-submit's command line. Each task
reads them from the connection when it needs them (`secrets()`), hands them to the
config in process, and to spark-submit's driver in its environment
(ingest.config.SECRET_ENVIRONMENT); Airflow masks connection secrets in task logs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from broker.client.security import SECURITY_KEYS
from ingest.config import KAFKA_PREFIX, SECRET_ENVIRONMENT, load_config

CONFIG_VARIABLE = "kafka_hourly_config"
CONFIG_ENV = "KAFKA_HOURLY_CONFIG"
DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "conf" / "ingest.yaml"

KAFKA_CONN = "kafka_default"
REGISTRY_CONN = "schema_registry_default"
WEBHDFS_CONN = "webhdfs_default"
SPARK_CONN = "spark_default"


@dataclass(frozen=True)
class Settings:
    config_path: str
    overrides: list[str]

    def load(self) -> dict[str, Any]:
        return load_config(self.config_path, self.overrides, secrets())

    def cli_args(self) -> list[str]:
        """The `python -m ingest` options that reproduce these settings."""
        args = ["--config", self.config_path]
        for item in self.overrides:
            args += ["--set", item]
        return args


def _variable(key: str) -> str | None:
    from airflow.sdk import Variable

    return Variable.get(key, default=None)


def _connection(conn_id: str):
    """The connection, or None when it is not defined (it is optional)."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return Connection.get(conn_id)
    except AirflowNotFoundException:
        return None


def config_path() -> str:
    """Variable kafka_hourly_config, else $KAFKA_HOURLY_CONFIG, else the repo's conf/ingest.yaml."""
    return _variable(CONFIG_VARIABLE) or os.environ.get(CONFIG_ENV) or str(DEFAULT_CONFIG)


def _absolute_root(root: str, path: str) -> str:
    """A relative root is relative to the project directory (the parent of conf/), not to
    whatever directory a worker happens to run in."""
    if urlsplit(root).scheme or os.path.isabs(root):
        return root
    return str((Path(path).resolve().parent.parent / root).resolve())


def kafka_bootstrap(conn) -> str:
    """Bootstrap servers from a Kafka connection: the Kafka provider's `bootstrap.servers`
    extra, else host[:port]."""
    servers = conn.extra_dejson.get("bootstrap.servers")
    if servers:
        return servers
    return f"{conn.host}:{conn.port}" if conn.port else conn.host


# The Kafka connection's secret extras, by their key in the load's config.
_SECRET_EXTRAS = {
    "kafka.sasl.password": "sasl.password",
    "kafka.ssl.key.password": "ssl.key.password",
}


def kafka_security_overrides(conn) -> list[str]:
    """`kafka.<key>=<value>` for the security extras of a Kafka connection that are not
    secrets (the login as sasl.username unless an extra says otherwise)."""
    extras = dict(conn.extra_dejson)
    if conn.login and "sasl.username" not in extras:
        extras["sasl.username"] = conn.login
    secret = set(_SECRET_EXTRAS.values())
    return [
        f"{KAFKA_PREFIX}{key}={value}"
        for key, value in sorted(extras.items())
        if key in SECURITY_KEYS and key not in secret and value is not None
    ]


def kafka_secrets(conn) -> dict[str, str]:
    """The load's secret keys from a Kafka connection: its password (or `sasl.password`
    extra) and `ssl.key.password`."""
    extras = conn.extra_dejson
    found = {key: extras.get(extra) for key, extra in _SECRET_EXTRAS.items()}
    if not found["kafka.sasl.password"] and conn.password:
        found["kafka.sasl.password"] = conn.password
    return {key: str(value) for key, value in found.items() if value}


def registry_security_overrides(conn) -> list[str]:
    """`registry.ssl.*` from a registry connection's extras (Confluent's client names:
    `ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`)."""
    extras = conn.extra_dejson
    return [
        f"registry.{key}={extras[key]}"
        for key in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location")
        if extras.get(key)
    ]


def registry_secrets(conn) -> dict[str, str]:
    """The registry's basic-auth `user:password` from its connection's login and password."""
    if conn.login and conn.password:
        return {"registry.basic.auth.user.info": f"{conn.login}:{conn.password}"}
    return {}


def secrets() -> dict[str, str]:
    """The secrets of the defined Kafka and registry connections (none without them)."""
    found: dict[str, str] = {}
    if (kafka := _connection(KAFKA_CONN)) is not None:
        found |= kafka_secrets(kafka)
    if (registry := _connection(REGISTRY_CONN)) is not None:
        found |= registry_secrets(registry)
    return found


def secret_environment() -> dict[str, str]:
    """The secrets as the environment of `python -m ingest` (spark-submit's driver)."""
    return {SECRET_ENVIRONMENT[key]: value for key, value in secrets().items()}


def registry_url(conn) -> str:
    """The registry URL from an HTTP-style connection: a host that is a URL already, or
    scheme (the connection's schema field, default http) + host + port."""
    if "://" in (conn.host or ""):
        return conn.host.rstrip("/")
    scheme = conn.schema or "http"
    return f"{scheme}://{conn.host}:{conn.port}" if conn.port else f"{scheme}://{conn.host}"


def webhdfs_root(conn, configured_root: str) -> str:
    """webhdfs://host:port/path; the path is the connection's schema field, else the path of
    the configured root."""
    path = conn.schema or urlsplit(configured_root).path or configured_root
    return f"webhdfs://{conn.host}:{conn.port or 9870}/{path.lstrip('/')}"


def spark_master(conn) -> str:
    """The master spark-submit is given for a Spark connection, as the Spark provider reads
    it: a `spark` connection's host is the master itself (local[2], yarn, k8s://...)."""
    if conn.conn_type == "spark" and conn.host and ("://" in conn.host or not conn.port):
        master = conn.host
    else:
        master = f"{conn.conn_type}://{conn.host or ''}"
    return f"{master}:{conn.port}" if conn.port else master


def resolve() -> Settings:
    """The config file and the overrides the defined Connections imply."""
    path = config_path()
    base = load_config(path)
    overrides = [f"root={_absolute_root(base['root'], path)}"]
    if (kafka := _connection(KAFKA_CONN)) is not None:
        overrides.append(f"bootstrap.servers={kafka_bootstrap(kafka)}")
        overrides += kafka_security_overrides(kafka)
    if (registry := _connection(REGISTRY_CONN)) is not None:
        overrides.append(f"registry.url={registry_url(registry)}")
        overrides += registry_security_overrides(registry)
    if (webhdfs := _connection(WEBHDFS_CONN)) is not None:
        overrides.append(f"root={webhdfs_root(webhdfs, base['root'])}")
        if webhdfs.login:
            overrides.append(f"webhdfs.user={webhdfs.login}")
    # spark-submit runs against the spark_default connection's master; the driver must
    # build its session on the same one, not on the file's spark.master.
    if (spark := _connection(SPARK_CONN)) is not None:
        overrides.append(f"spark.master={spark_master(spark)}")
    return Settings(path, overrides)
