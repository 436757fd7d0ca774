"""Warehouse tables: every finalized hour (or day) of a topic registered as a partition of
a table per topic in Spark's catalog, a Hive-compatible metastore, so
``SELECT ... FROM <db>.<table> WHERE dt=... AND hr=...`` works right after ``_SUCCESS``.

The plug point is a ``TableRegistrar`` chosen by ``warehouse.registrar``: ``none`` (the
default: no tables) or ``hive`` (Spark's embedded Derby metastore, or an external one
named by ``warehouse.metastore.uris``). Adding one is one entry in ``REGISTRARS``.

The data commit never depends on the metastore. Finalizing an hour (ingest/audit.py's
``finalize`` writing ``_SUCCESS``) queues its directory under ``_tables/pending/``
(``enqueue``); ``register_pending`` drains that queue through the registrar, so a
registration that failed (a metastore down, a table that cannot evolve) stays queued and
is done by the next run, and is reported. ``register_all`` re-registers every directory
that has a ``_SUCCESS`` (the ``register --all`` command), for a new or rebuilt metastore.
Both are idempotent: ``ADD IF NOT EXISTS PARTITION`` at the same location changes nothing.

A table is created on first use: EXTERNAL, at ``data/<topic>``, with the columns the
topic's files have (the decoder's Arrow schema, which the writers write, turned into
Spark types by pyspark's Arrow mapping), partitioned by the partitioner's levels (``dt``,
``hr``; ``dt`` for the daily partitioner, all strings) and stored as the topic's record
writer writes (Parquet, or Avro with the writer's Avro schema as ``avro.schema.literal``).
A field added to the topic's schema in the registry adds a column (``ADD COLUMNS``), so
older partitions read it as null; a field added inside a nested record widens that
column's struct (the metastore must allow it: the embedded one is configured to). A
field removed from the schema stays a column (older files have it).

Topics with the ingestion-time partitioner are not registered: their directories hold
whatever a run loaded, never a finalized period (their audit verdicts are under
``_audit/``).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import unquote

from ingest import layout
from ingest.fs import FileSystem
from ingest.plugins import WRITERS, TopicContext, TopicPlugins
from ingest.writers import avro_schema_with_kafka_fields
from schemas.client import RegistryClient, RegistrySettings

log = logging.getLogger(__name__)


class TableConflict(RuntimeError):
    """A table exists under the topic's name but is not the topic's (another location or
    format): refused rather than mixing data."""


@dataclass
class Registration:
    """What one registration pass did. ``failed`` maps a partition directory to the
    reason; those directories stay queued."""

    registered: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)  # tables created
    evolved: list[str] = field(default_factory=list)  # tables whose columns changed

    def text(self) -> str:
        lines = [f"warehouse: {len(self.registered)} partition(s) registered"]
        lines += [f"warehouse: created table {t}" for t in self.created]
        lines += [f"warehouse: evolved table {t}" for t in self.evolved]
        if self.failed:
            lines.append(
                f"warehouse: {len(self.failed)} partition(s) NOT registered; they stay queued "
                "for the next run (or `python -m ingest register`):"
            )
            lines += [f"  {d}: {reason}" for d, reason in sorted(self.failed.items())]
        return "\n".join(lines)


class TableRegistrar(Protocol):
    def register(self, directories: Sequence[str]) -> Registration:
        """Register each partition directory (``data/<topic>/dt=.../hr=...``, relative to
        the root) in its topic's table. Never raises for a table's or the metastore's
        problem: the directories it could not register are in ``failed``."""
        ...


class NoTableRegistrar:
    """``warehouse.registrar: none``: the load keeps no tables."""

    def __init__(self, config: dict[str, Any], fs: FileSystem, spark=None) -> None:
        pass

    def register(self, directories: Sequence[str]) -> Registration:
        return Registration(registered=list(directories))


# ---------------------------------------------------------------------------- the Hive registrar


def table_name(topic: str) -> str:
    """The table of a topic: Hive names are letters, digits and ``_``, case-insensitive."""
    return re.sub(r"[^a-z0-9_]", "_", topic.lower())


def _quote(name: str) -> str:
    return f"`{name.replace('`', '``')}`"


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class TableSpec:
    """What a topic's table must be, from the registry's latest schema and the plug points."""

    topic: str
    name: str  # database.table, quoted
    location: str  # URI of data/<topic>
    columns: Any  # pyspark StructType of the data columns
    partition_columns: tuple[str, ...]
    format: str  # a key of ingest.plugins.WRITERS
    avro_schema: dict | None  # for Avro tables: the schema the writer writes


def _table_spec(
    config: dict[str, Any], fs: FileSystem, topic: str, registry: RegistryClient
) -> TableSpec:
    from pyspark.sql.pandas.types import from_arrow_schema

    plugins = TopicPlugins.from_config(config)
    context = TopicContext(topic, registry, config["time.field"], 0)
    decoder = plugins.decoder(context)
    partitioner = plugins.partitioner(context)
    if partitioner.period_ms is None:
        raise ValueError(
            f"{topic}: an ingestion-time topic has no finalized partitions to register"
        )
    fmt = plugins.choice(topic).format
    # Hive has one timestamp type: instants (UTC), which is what the files hold.
    columns = from_arrow_schema(decoder.schema, prefer_timestamp_ntz=False)
    return TableSpec(
        topic=topic,
        name=f"{_quote(config['warehouse.database'])}.{_quote(table_name(topic))}",
        location=location(fs, layout.topic_dir(topic)),
        columns=columns,
        partition_columns=partitioner.key(0)._fields,
        format=fmt,
        avro_schema=(
            avro_schema_with_kafka_fields(decoder.value_schema, decoder.metadata)
            if WRITERS[fmt].extension == "avro"
            else None
        ),
    )


def location(fs: FileSystem, path: str) -> str:
    """The metastore's location of ``path``: a Hadoop path string, which Hadoop takes
    unescaped (a file:// URI from the local filesystem escapes ``=`` as ``%3D``, which
    Hadoop would read as a directory literally named ``dt%3D...``)."""
    return unquote(fs.uri(path))


def same_location(a: str, b: str) -> bool:
    """Whether two metastore locations name one directory (``file:/x`` is ``file:///x``)."""

    def norm(loc: str) -> str:
        return re.sub(r"^file:/+", "file:/", loc).rstrip("/")

    return norm(a) == norm(b)


def _column_ddl(columns) -> str:
    return ", ".join(f"{_quote(f.name)} {f.dataType.simpleString()}" for f in columns)


def parse_partition_dir(directory: str) -> tuple[str, list[tuple[str, str]]]:
    """``data/<topic>/dt=.../hr=...`` -> (topic, [(level, value), ...])."""
    parts = directory.strip("/").split("/")
    if len(parts) < 3 or parts[0] != layout.DATA:
        raise ValueError(f"not a partition directory: {directory!r}")
    levels = []
    for part in parts[2:]:
        name, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"not a partition directory: {directory!r}")
        levels.append((name, value))
    return parts[1], levels


class HiveTableRegistrar:
    """Tables in the session's Hive-compatible catalog, through Spark SQL."""

    def __init__(self, config: dict[str, Any], fs: FileSystem, spark) -> None:
        self.config = config
        self.fs = fs
        self.spark = spark
        self.database = config["warehouse.database"]
        if not config["warehouse.metastore.uris"]:
            # Derby's log goes beside its database, not into the working directory (read
            # when Derby boots, at the catalog's first use).
            derby = os.path.abspath(config["warehouse.metastore.derby.dir"])
            os.makedirs(derby, exist_ok=True)
            spark._jvm.java.lang.System.setProperty(
                "derby.stream.error.file", os.path.join(derby, "derby.log")
            )

    def register(self, directories: Sequence[str]) -> Registration:
        result = Registration()
        by_topic: dict[str, list[str]] = defaultdict(list)
        for d in directories:
            try:
                by_topic[parse_partition_dir(d)[0]].append(d)
            except ValueError as exc:
                result.failed[d] = str(exc)
        if not by_topic:
            return result
        registry = RegistrySettings.from_config(self.config).client()
        try:
            if self.spark.conf.get("spark.sql.catalogImplementation", "") != "hive":
                # Tables in Spark's in-memory catalog would vanish with the session.
                raise RuntimeError(
                    "the Spark session has no Hive catalog: create it with "
                    "ingest.warehouse.spark_conf(config)"
                )
            self.spark.sql(f"CREATE DATABASE IF NOT EXISTS {_quote(self.database)}")
        except Exception as exc:  # the metastore is down or misconfigured: all stay queued
            reason = f"metastore: {_first_line(exc)}"
            log.error("warehouse: cannot reach the metastore: %s", reason)
            for dirs in by_topic.values():
                result.failed.update(dict.fromkeys(dirs, reason))
            return result
        for topic, dirs in sorted(by_topic.items()):
            try:
                spec = _table_spec(self.config, self.fs, topic, registry)
                self._ensure_table(spec, result)
                self._add_partitions(spec, dirs)
                result.registered.extend(dirs)
            except Exception as exc:  # one topic's trouble must not hold back the others
                reason = f"table of {topic}: {_first_line(exc)}"
                log.error("warehouse: %s", reason)
                result.failed.update(dict.fromkeys(dirs, reason))
        return result

    # tables

    def _ensure_table(self, spec: TableSpec, result: Registration) -> None:
        db, table = self.database, table_name(spec.topic)
        if not self.spark.catalog.tableExists(f"{db}.{table}"):
            self.spark.sql(self._create_ddl(spec))
            result.created.append(f"{db}.{table}")
            log.info("warehouse: created %s.%s at %s", db, table, spec.location)
            return
        self._check_is_ours(spec)
        if self._evolve(spec):
            result.evolved.append(f"{db}.{table}")

    def _create_ddl(self, spec: TableSpec) -> str:
        partitioned = ", ".join(f"{_quote(c)} STRING" for c in spec.partition_columns)
        ddl = (
            f"CREATE EXTERNAL TABLE IF NOT EXISTS {spec.name} ({_column_ddl(spec.columns)}) "
            f"PARTITIONED BY ({partitioned}) "
            f"STORED AS {spec.format.upper()} LOCATION {_literal(spec.location)}"
        )
        if spec.avro_schema is not None:
            ddl += (
                f" TBLPROPERTIES ('avro.schema.literal'={_literal(json.dumps(spec.avro_schema))})"
            )
        return ddl

    def _describe(self, spec: TableSpec) -> dict[str, str]:
        """DESCRIBE FORMATTED's detail rows (Location, Provider, Serde Library, ...)."""
        rows = self.spark.sql(f"DESCRIBE FORMATTED {spec.name}").collect()
        return {r.col_name.strip().rstrip(":"): (r.data_type or "").strip() for r in rows}

    def _check_is_ours(self, spec: TableSpec) -> None:
        detail = self._describe(spec)
        location = detail.get("Location", "")
        if not same_location(location, spec.location):
            raise TableConflict(
                f"{spec.name} exists at {location}, not at {spec.location}: another topic "
                "with the same table name, or another root; rename or drop that table"
            )
        serde = detail.get("Serde Library", "").lower()
        if spec.format not in serde:
            raise TableConflict(
                f"{spec.name} is stored by {serde or 'an unknown serde'}, but {spec.topic} is "
                f"written as {spec.format}; the format of a topic's table cannot change"
            )

    def _evolve(self, spec: TableSpec) -> bool:
        """Bring the table's columns up to the topic's schema: new fields appended, nested
        records widened. Returns whether anything changed."""
        from pyspark.sql.types import StructType

        current = self.spark.table(spec.name).schema
        have = {f.name.lower(): f for f in current if f.name not in spec.partition_columns}
        added = [f for f in spec.columns if f.name.lower() not in have]
        widened = [
            f
            for f in spec.columns
            if f.name.lower() in have and f.dataType != have[f.name.lower()].dataType
        ]
        if not added and not widened:
            return False
        for f in widened:
            if not _widens(have[f.name.lower()].dataType, f.dataType):
                raise ValueError(
                    f"column {f.name} changed from {have[f.name.lower()].dataType.simpleString()} "
                    f"to {f.dataType.simpleString()}, which a table cannot follow"
                )
        if spec.avro_schema is not None:
            # Hive's Avro serde takes an Avro table's columns from the literal (in the
            # files' order), so the new literal is the whole evolution; old files resolve
            # against it, reading the added fields' defaults (null).
            self.spark.sql(
                f"ALTER TABLE {spec.name} SET TBLPROPERTIES "
                f"('avro.schema.literal'={_literal(json.dumps(spec.avro_schema))})"
            )
            self.spark.catalog.refreshTable(f"{self.database}.{table_name(spec.topic)}")
        elif widened:
            wanted = {f.name.lower(): f for f in spec.columns}
            data = StructType(
                [
                    wanted.get(f.name.lower(), f)
                    for f in current
                    if f.name not in spec.partition_columns
                ]
            )
            self._alter_data_schema(spec, data)
        if added and spec.avro_schema is None:
            self.spark.sql(f"ALTER TABLE {spec.name} ADD COLUMNS ({_column_ddl(added)})")
        log.info(
            "warehouse: %s evolved: added %s, widened %s",
            spec.name,
            [f.name for f in added],
            [f.name for f in widened],
        )
        return True

    def _alter_data_schema(self, spec: TableSpec, data) -> None:
        """Replace the data columns (same names, wider structs) through the session
        catalog: SQL has no statement that adds a field inside a struct column of a Hive
        table."""
        jspark = self.spark._jsparkSession
        jvm = self.spark._jvm
        ident = jvm.org.apache.spark.sql.catalyst.TableIdentifier.apply(
            table_name(spec.topic), jvm.scala.Some(self.database)
        )
        jspark.sessionState().catalog().alterTableDataSchema(
            ident, jspark.parseDataType(data.json())
        )
        self.spark.catalog.refreshTable(f"{self.database}.{table_name(spec.topic)}")

    # partitions

    def _add_partitions(self, spec: TableSpec, directories: Sequence[str]) -> None:
        clauses = []
        for d in directories:
            _, levels = parse_partition_dir(d)
            if tuple(name for name, _ in levels) != spec.partition_columns:
                raise ValueError(
                    f"{d} does not have the table's partition levels {spec.partition_columns}"
                )
            values = ", ".join(f"{_quote(n)}={_literal(v)}" for n, v in levels)
            clauses.append(f"PARTITION ({values}) LOCATION {_literal(location(self.fs, d))}")
        self.spark.sql(f"ALTER TABLE {spec.name} ADD IF NOT EXISTS {' '.join(clauses)}")


def _widens(old, new) -> bool:
    """``new`` is ``old`` with fields added (at any depth) and nothing else changed."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(old, StructType) and isinstance(new, StructType):
        fields = {f.name.lower(): f.dataType for f in new}
        return all(
            f.name.lower() in fields and _widens(f.dataType, fields[f.name.lower()]) for f in old
        )
    if isinstance(old, ArrayType) and isinstance(new, ArrayType):
        return _widens(old.elementType, new.elementType)
    if isinstance(old, MapType) and isinstance(new, MapType):
        return old.keyType == new.keyType and _widens(old.valueType, new.valueType)
    return old == new


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:500]


REGISTRARS: dict[str, Callable[..., TableRegistrar]] = {
    "none": NoTableRegistrar,
    "hive": HiveTableRegistrar,
}


# ---------------------------------------------------------------------------- Spark's catalog


def spark_conf(config: dict[str, Any]) -> dict[str, str]:
    """The Spark settings the registrar needs, to give the session when it is created
    (they are static: a running session keeps the catalog it started with)."""
    if config["warehouse.registrar"] != "hive":
        return {}
    conf = {"spark.sql.catalogImplementation": "hive"}
    if config["warehouse.metastore.uris"]:
        conf["spark.hadoop.hive.metastore.uris"] = config["warehouse.metastore.uris"]
    else:
        derby = os.path.abspath(config["warehouse.metastore.derby.dir"])
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={derby}/metastore_db;create=true"
        )
        # Lets a struct column gain fields (a field added inside a nested record).
        conf["spark.hadoop.hive.metastore.disallow.incompatible.col.type.changes"] = "false"
    if config["warehouse.dir"]:
        conf["spark.sql.warehouse.dir"] = config["warehouse.dir"]
    return conf


def table_of(config: dict[str, Any]) -> Callable[[str], str | None]:
    """topic -> ``database.table`` of its table, None when the load keeps no tables."""
    if config["warehouse.registrar"] == "none":
        return lambda topic: None
    return lambda topic: f"{config['warehouse.database']}.{table_name(topic)}"


def registrar_for(config: dict[str, Any], fs: FileSystem, spark=None) -> TableRegistrar:
    return REGISTRARS[config["warehouse.registrar"]](config, fs, spark)


# ---------------------------------------------------------------------------- the queue


def partition_dir_of(marker: str) -> str | None:
    """The data directory a ``_SUCCESS`` marker finalizes, or None for an audit verdict
    under ``_audit/`` (ingestion-time topics: no directory is finalized)."""
    directory = marker.rsplit("/", 1)[0]
    if not directory.startswith(f"{layout.DATA}/") or f"/{layout.AUDIT_MARKERS}/" in directory:
        return None
    return directory


def enqueue(config: dict[str, Any], fs: FileSystem, markers: Iterable[str]) -> list[str]:
    """Queue the directories of freshly written ``_SUCCESS`` markers for registration
    (nothing with ``warehouse.registrar: none``). Cheap and filesystem-only, so it runs
    wherever finalize runs (the CLI, an Airflow worker)."""
    if config["warehouse.registrar"] == "none":
        return []
    queued = []
    for marker in markers:
        directory = partition_dir_of(marker)
        if directory is not None:
            fs.write_bytes(layout.table_pending_file(directory), b"{}")
            queued.append(directory)
    return queued


def pending(fs: FileSystem) -> list[str]:
    """The queued directories, oldest hours first."""
    out = []
    for st in fs.list(layout.TABLES_PENDING):
        directory = layout.pending_table_dir(st.path.rsplit("/", 1)[-1])
        if directory is not None:
            out.append(directory)
    return sorted(out)


def register_pending(config: dict[str, Any], fs: FileSystem, spark=None) -> Registration:
    """Register every queued directory; the registered leave the queue, the failed stay
    (with the reason in their queue file, for the operator)."""
    queued = pending(fs)
    if not queued:
        return Registration()
    result = registrar_for(config, fs, spark).register(queued)
    _settle(fs, result)
    return result


def register_all(config: dict[str, Any], fs: FileSystem, spark=None) -> Registration:
    """Register every finalized directory under data/ (those with ``_SUCCESS``), and
    settle the queue: for a new metastore, or after restoring one. Idempotent."""
    finalized = set(pending(fs))
    for topic_dir in fs.list(layout.DATA):
        if topic_dir.is_dir:
            finalized.update(_finalized_under(fs, topic_dir.path))
    result = registrar_for(config, fs, spark).register(sorted(finalized))
    _settle(fs, result)
    return result


def _finalized_under(fs: FileSystem, directory: str) -> Iterable[str]:
    entries = fs.list(directory)
    if any(not e.is_dir and e.path.rsplit("/", 1)[-1] == layout.SUCCESS for e in entries):
        yield directory.strip("/")
    for e in entries:
        name = e.path.rsplit("/", 1)[-1]
        if e.is_dir and "=" in name and not name.startswith(("_", ".")):
            yield from _finalized_under(fs, e.path)


def mark_failed(fs: FileSystem, directories: Iterable[str], reason: str) -> None:
    """Keep ``directories`` queued, with the reason the operator reads in their queue files."""
    _settle(fs, Registration(failed=dict.fromkeys(directories, reason)))


def _settle(fs: FileSystem, result: Registration) -> None:
    for directory in result.registered:
        fs.delete(layout.table_pending_file(directory))
    for directory, reason in result.failed.items():
        fs.write_bytes(layout.table_pending_file(directory), json.dumps({"error": reason}).encode())
