"""Every key of conf/ingest.yaml, declared once (the broker's ConfigDef), so the load,
the CLI, the DAGs and the generated reference agree. YAML nesting is flattened to
dotted keys: `topics: {whitelist: [...]}` is `topics.whitelist`.

How the load reaches Kafka securely: `kafka:` holds the keys of the clients' security
table (broker/client/security.py) — `kafka: {security.protocol: SASL_SSL, sasl.mechanism:
SCRAM-SHA-512, sasl.username: loader, ssl.ca.location: /etc/kafka/ca.pem}` — parsed into
one SecurityConfig (`kafka_security(config)`) that every consumer, producer and admin
client of the load uses, the tasks' on the executors too. Secrets never go on a command
line or into a file next to the DAGs: `kafka.sasl.password` and `kafka.ssl.key.password`
come from the environment (SECRET_ENVIRONMENT), where the DAGs put them from the
`kafka_default` Airflow Connection."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from broker.client.security import SecurityConfig, split_security
from broker.config.definition import ConfigDef, ConfigError, at_least, between, one_of
from broker.util.clock import HOUR_MS, SECOND_MS
from ingest import plugins, warehouse
from schemas.windows import DEFAULT_AUDIT_WINDOW_MS


def _per_topic(kind: str):
    return lambda entries: plugins.per_topic_problem(kind, entries)


def _hive_name(value: str) -> str | None:
    if not re.fullmatch(r"[A-Za-z0-9_]+", value):
        return f"{value!r} is not a Hive database name (letters, digits and _)"
    return None


def _regexes(value: list[str]) -> str | None:
    for item in value:
        try:
            re.compile(item)
        except re.error as exc:
            return f"{item!r} is not a regular expression: {exc}"
    return None


INGEST_CONFIG = (
    ConfigDef("Hourly load (conf/ingest.yaml)")
    .define(
        "bootstrap.servers",
        "list",
        ["127.0.0.1:9092"],
        "Brokers to bootstrap from.",
        group="sources",
    )
    .define(
        "registry.url",
        "string",
        "http://127.0.0.1:8081",
        "Schema registry (Confluent REST API): http:// or https://.",
        group="sources",
    )
    .define(
        "registry.basic.auth.user.info",
        "password",
        None,
        "user:password for a registry with basic authentication (Confluent's "
        "basic.auth.user.info). A secret: given by the environment "
        "(KAFKA_HOURLY_REGISTRY_USER_INFO), which the DAGs fill from the registry "
        "Connection's login and password.",
        optional=True,
        group="sources",
    )
    .define(
        "registry.ssl.ca.location",
        "string",
        None,
        "A PEM file of the CA certificates an https registry is checked against; unset: the "
        "system's.",
        optional=True,
        group="sources",
    )
    .define(
        "registry.ssl.certificate.location",
        "string",
        None,
        "A PEM client certificate (and its key, unless registry.ssl.key.location is set) for "
        "a registry that asks for one.",
        optional=True,
        group="sources",
    )
    .define(
        "registry.ssl.key.location",
        "string",
        None,
        "The private key of registry.ssl.certificate.location, if in a file of its own.",
        optional=True,
        group="sources",
    )
    .define(
        "kafka.isolation.level",
        "string",
        "read_committed",
        "read_committed: ranges end at each partition's last stable offset and the records "
        "of aborted transactions are skipped (counted as aborted in the ledger, not loaded, "
        "not lost); read_uncommitted: ranges end at the high watermark and every data record "
        "is loaded, aborted ones too. Transaction markers are never loaded.",
        validator=one_of("read_committed", "read_uncommitted"),
        group="sources",
    )
    .define(
        "topics.whitelist",
        "list",
        [".*"],
        "Topics to load: regular expressions, a topic matching any is loaded (full match).",
        validator=_regexes,
        group="topics",
    )
    .define(
        "topics.blacklist",
        "list",
        ["_.*"],
        "Topics never loaded even when whitelisted "
        "(full match); by default internal topics such as _schemas and _audit.",
        validator=_regexes,
        group="topics",
    )
    .define(
        "root",
        "string",
        "var/warehouse",
        "Root of the load: a path or file:// URI, "
        "webhdfs://host:port/path, or hdfs://namenode/path.",
        group="output",
    )
    .define(
        "root.filesystem",
        "string",
        "auto",
        "How the driver and the tasks reach the root: auto (by its scheme: local disk, "
        "WebHDFS, else Hadoop's FileSystem API) or hadoop (Hadoop's FileSystem API whatever "
        "the scheme: the hdfs:// code path on a file:// root).",
        validator=one_of("auto", "hadoop"),
        group="output",
    )
    .define(
        "decoder",
        "string",
        "confluent-avro",
        "How values are read, for every topic without its own in per.topic.decoder: "
        "confluent-avro (Avro in the Confluent framing, read as the latest schema of the "
        "topic's value subject), json (JSON objects read as that schema) or raw (the "
        "bytes as they are).",
        validator=one_of(*plugins.DECODERS),
        group="topics",
    )
    .define(
        "partitioner",
        "string",
        "event-hour",
        "The directories rows go to, for every topic without its own in "
        "per.topic.partitioner: event-hour (dt=/hr= of the event time), event-day "
        "(dt= of the event time) or ingestion-time (dt=/hr= of the run that first "
        "loaded the records).",
        validator=one_of(*plugins.PARTITIONERS),
        group="topics",
    )
    .define(
        "format",
        "string",
        "parquet",
        "Data file format (the record writer) for every topic without its own in "
        "per.topic.format: parquet or avro.",
        validator=one_of(*plugins.WRITERS),
        group="topics",
    )
    .define(
        "per.topic.decoder",
        "list",
        [],
        "Decoders of single topics: topic=decoder entries, e.g. app-logs=raw.",
        validator=_per_topic("decoder"),
        group="topics",
    )
    .define(
        "per.topic.partitioner",
        "list",
        [],
        "Partitioners of single topics: topic=partitioner entries, e.g. app-logs=ingestion-time.",
        validator=_per_topic("partitioner"),
        group="topics",
    )
    .define(
        "per.topic.format",
        "list",
        [],
        "Data file formats of single topics: topic=format entries, e.g. clicks=avro.",
        validator=_per_topic("format"),
        group="topics",
    )
    .define(
        "time.field",
        "string",
        "header.time",
        "Dotted path of the event-time field the event-hour and event-day "
        "partitioners use; records without it use their Kafka timestamp.",
        group="output",
    )
    .define(
        "offsets.new.partition.start",
        "string",
        "earliest",
        "Where a partition never loaded before starts.",
        validator=one_of("earliest", "latest"),
        group="offsets",
    )
    .define(
        "offsets.on.gap",
        "string",
        "continue",
        "When a stored offset is below the earliest retained "
        "offset: record the gap and continue from earliest, or fail the run.",
        validator=one_of("continue", "fail"),
        group="offsets",
    )
    .define(
        "limits.max.records.per.partition",
        "long",
        5_000_000,
        "At most this many offsets per partition in one run; the rest is loaded next run.",
        validator=at_least(1),
        group="limits",
    )
    .define(
        "limits.max.bytes.per.partition",
        "long",
        1 << 30,
        "At most about this many bytes per partition in one run (checked per fetch).",
        validator=at_least(1),
        group="limits",
    )
    .define(
        "limits.max.records.per.task",
        "long",
        2_000_000,
        "A larger range is split across several tasks.",
        validator=at_least(1),
        group="limits",
    )
    .define(
        "fetch.max.bytes",
        "int",
        8 << 20,
        "Bytes per fetch request of a task.",
        validator=at_least(1024),
        group="limits",
    )
    .define(
        "audit.topic",
        "string",
        "_audit",
        "Topic of the producers' monitoring events.",
        group="audit",
    )
    .define(
        "audit.window.ms",
        "long",
        DEFAULT_AUDIT_WINDOW_MS,
        "Audit window; must match the producers'.",
        validator=at_least(SECOND_MS),
        group="audit",
    )
    .define(
        "audit.threshold",
        "double",
        1.0,
        "Fraction of the producers' count that makes a window complete (1.0: exact).",
        validator=between(0.0, 1.0),
        group="audit",
    )
    .define(
        "audit.publish",
        "boolean",
        True,
        "Publish the loader's counts to the audit topic as tier hadoop.",
        group="audit",
    )
    .define("spark.master", "string", "local[2]", "Spark master for the load.", group="spark")
    .define(
        "spark.app.name", "string", "kafka-hourly-load", "Spark application name.", group="spark"
    )
    .define(
        "lock.stale.ms",
        "long",
        HOUR_MS,
        "A run lock older than this (a dead driver) may be broken by the next run.",
        validator=at_least(SECOND_MS),
        group="output",
    )
    .define(
        "webhdfs.user",
        "string",
        "",
        "User for webhdfs:// roots (empty: the process user).",
        optional=True,
        group="output",
    )
    .define(
        "webhdfs.kerberos",
        "boolean",
        False,
        "Use Kerberos (SPNEGO) for webhdfs:// roots.",
        group="output",
    )
    .define(
        "warehouse.registrar",
        "string",
        "none",
        "Tables for the loaded data: none, or hive (a table per topic in Spark's "
        "Hive-compatible catalog, each finalized hour or day registered as a partition "
        "right after its _SUCCESS; ingest/warehouse.py).",
        validator=one_of(*warehouse.REGISTRARS),
        group="warehouse",
    )
    .define(
        "warehouse.database",
        "string",
        "kafka_hourly",
        "Database of the topics' tables (created if missing); a topic's table is its name "
        "with every character other than letters, digits and _ turned into _.",
        validator=_hive_name,
        group="warehouse",
    )
    .define(
        "warehouse.metastore.uris",
        "string",
        "",
        "Thrift URIs of an external Hive metastore (thrift://host:9083[,...]); empty: "
        "Spark's embedded Derby metastore in warehouse.metastore.derby.dir.",
        optional=True,
        group="warehouse",
    )
    .define(
        "warehouse.metastore.derby.dir",
        "string",
        "var/metastore",
        "Directory of the embedded Derby metastore (its database metastore_db and "
        "derby.log; one Spark driver at a time may open it); unused with "
        "warehouse.metastore.uris.",
        group="warehouse",
    )
    .define(
        "metrics.textfile.dir",
        "string",
        "",
        "The node exporter's textfile collector directory: each committed run writes "
        "kafka_hourly_load.prom and each audit kafka_hourly_audit.prom there (empty: not "
        "written). The same text is always written next to the run's manifest "
        "(history/<run>/metrics.prom, audit.prom).",
        optional=True,
        group="metrics",
    )
    .define(
        "metrics.pushgateway.url",
        "string",
        "",
        "A Prometheus Pushgateway (`host:port` or URL) the run's and the audit's metrics are "
        "pushed to, grouped by `step` (load, audit); empty: not pushed.",
        optional=True,
        group="metrics",
    )
    .define(
        "metrics.pushgateway.job",
        "string",
        "kafka_hourly_load",
        "The job label of the pushed metrics.",
        group="metrics",
    )
    .define(
        "log.file",
        "string",
        "var/log/ingest.log",
        "Where `python -m ingest` appends its log, with the full traceback of an error "
        "the terminal shows in one line; empty: no log file (tracebacks are then not kept).",
        optional=True,
        group="output",
    )
    .define(
        "warehouse.dir",
        "string",
        "",
        "spark.sql.warehouse.dir: where new databases live (the tables themselves are "
        "external, at the root's data/<topic>); empty: Spark's default.",
        optional=True,
        group="warehouse",
    )
    .define(
        "compaction.topics",
        "list",
        [],
        "Regular expressions (full match) of the topics whose finalized hours the DAG's "
        "compact task merges into files of compaction.target.file.bytes; empty: no "
        "compaction (python -m ingest compact --topic still compacts what it is told).",
        validator=_regexes,
        group="compaction",
    )
    .define(
        "compaction.target.file.bytes",
        "long",
        128 << 20,
        "Size compaction aims at: an hour's files of one schema are packed (first fit, "
        "largest first) into outputs of at most this many input bytes; a file this large "
        "is left alone.",
        validator=at_least(1),
        group="compaction",
    )
    .define(
        "compaction.lookback.hours",
        "int",
        48,
        "Compaction without an explicit hour range looks at finalized hours that started "
        "at most this many hours before the current hour (0: every hour).",
        validator=at_least(0),
        group="compaction",
    )
)


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _as_raw(value: Any) -> Any:
    """YAML gives typed values. Lists stay lists (a regex may hold a comma); scalars go
    back to text so every key is parsed and validated the same way as an override."""
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if value is None else str(value)


KAFKA_PREFIX = "kafka."
# The parsed SecurityConfig, in the settings load_config returns.
KAFKA_SECURITY = "kafka.security"
# Secret keys -> the environment variable that gives them (never an override or a file).
SECRET_ENVIRONMENT = {
    "kafka.sasl.password": "KAFKA_HOURLY_KAFKA_SASL_PASSWORD",
    "kafka.ssl.key.password": "KAFKA_HOURLY_KAFKA_SSL_KEY_PASSWORD",
    "registry.basic.auth.user.info": "KAFKA_HOURLY_REGISTRY_USER_INFO",
}


def secrets_from_environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    return {key: environ[var] for key, var in SECRET_ENVIRONMENT.items() if environ.get(var)}


def kafka_security(config: Mapping[str, Any]) -> SecurityConfig | None:
    """The load's Kafka security (None: settings not made by load_config: plaintext)."""
    return config.get(KAFKA_SECURITY)


def load_config(
    path: str | Path | None = None,
    overrides: Iterable[str] = (),
    secrets: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The file, then `key=value` overrides, then `secrets` (SECRET_ENVIRONMENT's keys,
    handed over in process), validated."""
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            tree = yaml.safe_load(Path(path).read_text()) or {}
        except OSError as exc:
            raise ConfigError(f"Cannot read configuration file {path}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"Configuration file {path} is not valid YAML: {exc}") from None
        if not isinstance(tree, Mapping):
            raise ConfigError(f"Configuration file {path} must hold a mapping of keys")
        raw = {k: _as_raw(v) for k, v in flatten(tree).items()}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"Malformed override {item!r}: expected key=value")
        key, value = item.split("=", 1)
        raw[key.strip()] = value.strip()
    for key, value in (secrets or {}).items():
        if key not in SECRET_ENVIRONMENT:
            raise ConfigError(f"{key} is not a secret key ({', '.join(SECRET_ENVIRONMENT)})")
        raw[key] = value
    security, raw = split_security(raw, KAFKA_PREFIX)
    return {**INGEST_CONFIG.parse(raw), KAFKA_SECURITY: security}
