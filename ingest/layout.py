"""Every path of the load's root (docs/contracts/hdfs-load.md), in one place.

    data/<topic>/dt=YYYY-MM-DD/hr=HH/<topic>+<partition>+<first>+<next>+<run>.<parquet|avro>
    data/<topic>/dt=YYYY-MM-DD/hr=HH/_SUCCESS        the hour is complete and audited
    data/<topic>/dt=YYYY-MM-DD/...                   a daily partitioner's files and _SUCCESS
    data/<topic>/_audit/dt=YYYY-MM-DD/hr=HH/_SUCCESS the audit's verdict on an event hour
                                                     when directories are not event time
    errors/<topic>/<run>/<topic>+<partition>+<first>+<next>.<ext>   quarantined records
    history/<run>/manifest.json                      a committed run (offsets, counts, files)
    _runs/<run>/staging/...                          what the run's tasks wrote; never read
    _runs/<run>/COMMITTED                            the commit intent: its existence IS the commit
    _runs/<run>/tmp/                                 the driver's temp files for this run
    _lock/<generation>.json                          the run lock (see ingest/commit.py)
    _tables/pending/<topic>+dt=...+hr=...            a finalized directory not yet registered
                                                     in its warehouse table (ingest/warehouse.py)

All paths are relative to the root (see ingest/fs). Names starting with ``_`` or ``.`` are
skipped by Spark, Hive and Trino, so staging, the lock and markers never leak into queries.

The directories below ``data/<topic>/`` are a partitioner's keys (ingest/partitioner.py):
a key is a NamedTuple whose fields name the levels, ``Hour(dt, hr)`` ->
``dt=YYYY-MM-DD/hr=HH``, ``Day(dt)`` -> ``dt=YYYY-MM-DD``.

Run ids sort by time as strings: ``20261122T030012.345Z-9f3a0c1d`` is the UTC start time to
the millisecond, then 8 random hex digits so two drivers never pick the same id.
``new_run_id(after=...)`` also guarantees the new id sorts after the last committed one even
if the clock stepped back, so "the newest run" is always the greatest id.
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from broker.protocol.topic import topic_name_problem
from broker.util.clock import SECOND_MS

DATA = "data"
ERRORS = "errors"
HISTORY = "history"
RUNS = "_runs"
LOCK_DIR = "_lock"
SUCCESS = "_SUCCESS"
MANIFEST = "manifest.json"
INTENT = "COMMITTED"
AUDIT_MARKERS = "_audit"
TABLES = "_tables"
TABLES_PENDING = f"{TABLES}/pending"

_RUN_TIME = "%Y%m%dT%H%M%S"
RUN_ID_RE = re.compile(r"^(\d{8}T\d{6})\.(\d{3})Z-([0-9a-f]{8})$")


class Hour(NamedTuple):
    """An hour in UTC as the partition directories spell it: ``dt=YYYY-MM-DD/hr=HH``."""

    dt: str  # YYYY-MM-DD
    hr: str  # HH

    @classmethod
    def of_ms(cls, epoch_ms: int) -> Hour:
        t = datetime.fromtimestamp(epoch_ms // SECOND_MS, UTC)
        return cls(t.strftime("%Y-%m-%d"), t.strftime("%H"))

    @property
    def start_ms(self) -> int:
        t = datetime.strptime(f"{self.dt} {self.hr}", "%Y-%m-%d %H").replace(tzinfo=UTC)
        return int(t.timestamp()) * SECOND_MS


class Day(NamedTuple):
    """A day in UTC as the partition directories spell it: ``dt=YYYY-MM-DD``."""

    dt: str  # YYYY-MM-DD

    @classmethod
    def of_ms(cls, epoch_ms: int) -> Day:
        return cls(Hour.of_ms(epoch_ms).dt)

    @property
    def start_ms(self) -> int:
        return Hour(self.dt, "00").start_ms


def key_dirs(key: Any) -> str:
    """The directories a partition key names: ``name=value`` per field of the NamedTuple."""
    return "/".join(f"{name}={value}" for name, value in zip(key._fields, key, strict=True))


# run ids


def new_run_id(now: datetime | None = None, after: str | None = None) -> str:
    """A fresh run id for ``now`` (UTC), strictly greater than ``after`` when given."""
    t = (now or datetime.now(UTC)).astimezone(UTC)
    if after is not None:
        floor = run_time(after) + timedelta(milliseconds=1)
        t = max(t, floor)
    millis = t.microsecond // 1000
    return f"{t.strftime(_RUN_TIME)}.{millis:03d}Z-{secrets.token_hex(4)}"


def run_start_ms(run_id: str) -> int:
    """The run's start time in ms since the epoch."""
    return int(run_time(run_id).timestamp() * SECOND_MS)


def is_run_id(name: str) -> bool:
    return RUN_ID_RE.match(name) is not None


def run_time(run_id: str) -> datetime:
    m = RUN_ID_RE.match(run_id)
    if m is None:
        raise ValueError(f"not a run id: {run_id!r}")
    t = datetime.strptime(m.group(1), _RUN_TIME).replace(tzinfo=UTC)
    return t + timedelta(milliseconds=int(m.group(2)))


# user-visible data


def _topic(topic: str) -> str:
    problem = topic_name_problem(topic)
    if problem is not None:
        raise ValueError(f"not a Kafka topic name: {topic!r}: {problem}")
    return topic


def topic_dir(topic: str) -> str:
    return f"{DATA}/{_topic(topic)}"


def partition_dir(topic: str, key: Any) -> str:
    """The directory of a partition key (``Hour``, ``Day``, any NamedTuple of strings)."""
    return f"{topic_dir(topic)}/{key_dirs(key)}"


def hour_dir(topic: str, hour: Hour) -> str:
    return partition_dir(topic, hour)


def data_file(
    topic: str, key: Any, partition: int, first: int, next_: int, run_id: str, ext: str
) -> str:
    """One file per (partition, output partition) per run; first/next are the offsets the
    writing task covered, so names never collide between tasks, runs or reruns."""
    return f"{partition_dir(topic, key)}/{topic}+{partition}+{first}+{next_}+{run_id}.{ext}"


class DataFileName(NamedTuple):
    topic: str
    partition: int
    first: int
    next: int
    run_id: str
    ext: str


def parse_data_file(path: str) -> DataFileName:
    """The parts of a data file's name (its last path segment)."""
    name = path.rsplit("/", 1)[-1]
    stem, _, ext = name.rpartition(".")
    parts = stem.rsplit("+", 4)
    if len(parts) != 5 or not is_run_id(parts[4]):
        raise ValueError(f"not a data file name: {name!r}")
    topic, partition, first, next_, run_id = parts
    return DataFileName(topic, int(partition), int(first), int(next_), run_id, ext)


def success_marker(topic: str, key: Any) -> str:
    """``_SUCCESS`` of a partition directory: its data is complete and audited."""
    return f"{partition_dir(topic, key)}/{SUCCESS}"


def success_marker_beside(data_file_path: str) -> str:
    """``_SUCCESS`` of the directory a data file is in."""
    return f"{data_file_path.rsplit('/', 1)[0]}/{SUCCESS}"


def audit_marker(topic: str, hour: Hour) -> str:
    """The audit's verdict on an event hour of a topic whose directories are not event
    time (ingestion-time partitioning): hidden from queries by the leading underscore."""
    return f"{topic_dir(topic)}/{AUDIT_MARKERS}/{key_dirs(hour)}/{SUCCESS}"


def errors_dir(topic: str, run_id: str) -> str:
    return f"{ERRORS}/{_topic(topic)}/{run_id}"


def errors_file(topic: str, run_id: str, partition: int, first: int, next_: int, ext: str) -> str:
    return f"{errors_dir(topic, run_id)}/{topic}+{partition}+{first}+{next_}.{ext}"


# history


def history_dir(run_id: str) -> str:
    return f"{HISTORY}/{run_id}"


def manifest_file(run_id: str) -> str:
    return f"{history_dir(run_id)}/{MANIFEST}"


# the driver's private area


def run_dir(run_id: str) -> str:
    return f"{RUNS}/{run_id}"


def staging_dir(run_id: str) -> str:
    """Tasks write only below here; the task chooses its own sub-layout (one directory per
    attempt is the safe choice) and reports each staged path with its final path."""
    return f"{run_dir(run_id)}/staging"


def intent_file(run_id: str) -> str:
    return f"{run_dir(run_id)}/{INTENT}"


def driver_tmp_dir(run_id: str) -> str:
    return f"{run_dir(run_id)}/tmp"


def table_pending_file(directory: str) -> str:
    """The queue entry of a finalized partition directory (``data/<topic>/dt=.../hr=...``)
    awaiting registration in its table: one flat name, ``<topic>+dt=...+hr=...`` (``+``
    is in no topic name and no level)."""
    prefix = f"{DATA}/"
    if not directory.startswith(prefix):
        raise ValueError(f"not a data directory: {directory!r}")
    return f"{TABLES_PENDING}/{directory.removeprefix(prefix).strip('/').replace('/', '+')}"


def pending_table_dir(name: str) -> str | None:
    """The directory a queue entry's name stands for, None for strays (temp files)."""
    if name.startswith((".", "_")) or "+" not in name:
        return None
    return f"{DATA}/{name.replace('+', '/')}"


def lock_file(generation: int) -> str:
    return f"{LOCK_DIR}/{generation:012d}.json"


def lock_heartbeat_file(generation: int) -> str:
    return f"{LOCK_DIR}/{generation:012d}.heartbeat"


def lock_generation(name: str) -> int | None:
    """The generation a lock file name holds, or None for heartbeats and strays."""
    m = re.match(r"^(\d{12})\.json$", name.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None
