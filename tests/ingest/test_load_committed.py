"""The load over a topic with transactions, on a broker process (docs/contracts/hdfs-load.md,
"Transactions"). Transactional batches are produced raw and ended through WriteTxnMarkers,
as a transaction coordinator ends them; plain records come from the audited producer.

At read_committed (the default) the load writes exactly the committed and plain records,
its ledger counts the aborted records and the markers apart (skipped, not lost), and the
audit finds the hour complete with no gap; at read_uncommitted it writes every data
record, aborted ones too, and still no marker. Planning stops at the last stable offset
while a transaction is open."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.client.simple_consumer import SimpleConsumer
from broker.processes import ROOT, BrokerProcess
from broker.protocol.apis import PRODUCE, WRITE_TXN_MARKERS
from broker.util.clock import HOUR_MS, now_ms
from ingest import audit
from ingest.config import load_config
from ingest.job import open_root, run_load
from ingest.plan import plan_ranges
from ingest.range_reader import RangeReader
from ingest.spark_runner import spark_session
from schemas.audited_producer import AuditedProducer
from schemas.windows import DEFAULT_AUDIT_WINDOW_MS, window_start
from tests.helpers.cluster import fresh
from tests.helpers.group_state import connect
from tests.helpers.server_requests import (
    RAW_TXN_SETTINGS,
    marker_body,
    produce_body,
    txn_records,
)

NOW = now_ms()
HOUR = NOW - NOW % HOUR_MS - 3 * HOUR_MS  # a whole hour, ended long enough ago to audit
ABORTED_PID, COMMITTED_PID, OPEN_PID = 770_001, 770_002, 770_003


class Transactions:
    """Raw transactional produce and markers on one connection."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.conn = connect(bootstrap, client_id="txn-writer")
        self.topic = topic

    def produce(self, pid: int, *values: bytes, timestamp: int) -> None:
        records = txn_records(pid, *values, timestamp=timestamp)
        answer = self.conn.request(PRODUCE, produce_body(self.topic, records), 8)
        (p,) = answer["responses"][0]["partition_responses"]
        assert p["error_code"] == 0, p

    def end(self, pid: int, commit: bool) -> None:
        answer = self.conn.request(WRITE_TXN_MARKERS, marker_body(pid, self.topic, commit))
        assert answer["markers"][0]["topics"][0]["partitions"][0]["error_code"] == 0

    def close(self) -> None:
        self.conn.close()


def create(bootstrap: str, topic: str) -> None:
    with AdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)])


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """The module's broker: raw transactional produces name a transactional id no
    coordinator knows (tests.helpers.server_requests.RAW_TXN_SETTINGS)."""
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "logs", RAW_TXN_SETTINGS) as b:
        yield b


@pytest.fixture(scope="module")
def spark():
    """The load's own session (its workers run this interpreter), shared by the module."""
    session = spark_session("local[1]", "txn-load")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def topic(broker, registry) -> str:
    """offsets 0 plain, 1-2 aborted, 3-4 committed, 5 plain, 6 ABORT, 7 COMMIT, 8 plain.
    The producers count every record they delivered, the transactional ones too (the
    audited producer's tally stands in for the transactional application's)."""
    name = fresh("txn-load")
    create(broker.bootstrap, name)
    txn = Transactions(broker.bootstrap, name)
    ts = HOUR + 60_000
    with AuditedProducer(
        broker.bootstrap, registry=registry.url, service="txn", emit_interval_s=None, linger_ms=0
    ) as producer:
        producer.send(name, b"p1", timestamp_ms=ts).result(10)
        txn.produce(ABORTED_PID, b"a1", b"a2", timestamp=ts + 1)
        txn.produce(COMMITTED_PID, b"b1", b"b2", timestamp=ts + 3)
        producer.send(name, b"p2", timestamp_ms=ts + 5).result(10)
        txn.end(ABORTED_PID, commit=False)
        txn.end(COMMITTED_PID, commit=True)
        producer.send(name, b"p3", timestamp_ms=ts + 8).result(10)
        producer.tally.add((name, window_start(ts, DEFAULT_AUDIT_WINDOW_MS)), 4)
    txn.close()
    return name


def config_for(broker, registry, root, topic: str, *overrides: str) -> dict:
    return load_config(
        ROOT / "conf" / "ingest.yaml",
        [
            f"bootstrap.servers={broker.bootstrap}",
            f"registry.url={registry.url}",
            f"root={root}",
            f"topics.whitelist={topic}",
            "decoder=raw",
            "spark.master=local[1]",
            *overrides,
        ],
    )


def loaded_values(fs, manifest) -> list[bytes]:
    values = []
    for p in manifest.partitions:
        for f in p.files:
            values += pq.read_table(fs.uri(f.path)).column("value").to_pylist()
    return sorted(values)


def test_read_committed_loads_committed_records_and_accounts_for_aborted(
    broker, registry, topic, spark, tmp_path
):
    config = config_for(broker, registry, tmp_path / "wh", topic)
    assert config["kafka.isolation.level"] == "read_committed"
    manifest = run_load(config, spark=spark, show_progress=False).manifest
    (p,) = manifest.partitions
    assert (p.first, p.next) == (0, 9)
    assert (p.loaded, p.quarantined, p.aborted, p.markers, p.skipped) == (5, 0, 2, 2, 4)
    assert p.gap is None and not p.problems()
    fs = open_root(config, spark)
    assert loaded_values(fs, manifest) == [b"b1", b"b2", b"p1", b"p2", b"p3"]
    (w,) = manifest.windows
    assert (w.loaded, w.aborted) == (5, 2)

    report = audit.audit(config, fs, manifest.run_id)
    (hour,) = report.hours
    assert hour.complete, hour.reasons
    assert (hour.produced, hour.loaded, hour.aborted) == (7, 5, 2)
    assert report.gaps == {}
    assert report.transactions == {topic: {"aborted": 2, "markers": 2}}
    assert "skipped 2 aborted records and 2 markers" in report.text()


def test_read_uncommitted_loads_aborted_records_too_but_never_markers(
    broker, registry, topic, spark, tmp_path
):
    config = config_for(
        broker, registry, tmp_path / "wh", topic, "kafka.isolation.level=read_uncommitted"
    )
    manifest = run_load(config, spark=spark, show_progress=False).manifest
    (p,) = manifest.partitions
    assert (p.first, p.next, p.loaded, p.aborted, p.markers, p.skipped) == (0, 9, 7, 0, 2, 2)
    fs = open_root(config, spark)
    assert loaded_values(fs, manifest) == [b"a1", b"a2", b"b1", b"b2", b"p1", b"p2", b"p3"]
    (hour,) = audit.audit(config, fs, manifest.run_id).hours
    assert hour.complete and (hour.loaded, hour.aborted) == (7, 0)


def test_an_open_transaction_ends_the_plan_at_the_last_stable_offset(broker):
    name = fresh("txn-open")
    create(broker.bootstrap, name)
    txn = Transactions(broker.bootstrap, name)
    txn.produce(OPEN_PID + 1, b"x1", timestamp=HOUR)  # 0
    txn.end(OPEN_PID + 1, commit=True)  # 1
    txn.produce(OPEN_PID, b"o1", b"o2", timestamp=HOUR)  # 2-3, still open

    def plan(level: str):
        with SimpleConsumer(broker.bootstrap, isolation_level=level) as consumer:
            (r,) = plan_ranges(consumer, [name], {}, max_records_per_partition=100)
            reader = RangeReader(consumer, name, 0, r.first, r.next)
            values = [v for chunk in reader.chunks() for v in chunk.value.to_pylist()]
            return (r.first, r.next), values, (reader.skipped, reader.markers, reader.aborted)

    assert plan("read_committed") == ((0, 2), [b"x1"], (1, 1, 0))
    assert plan("read_uncommitted") == ((0, 4), [b"x1", b"o1", b"o2"], (1, 1, 0))
    txn.end(OPEN_PID, commit=False)  # 4
    assert plan("read_committed") == ((0, 5), [b"x1"], (4, 2, 2))
    txn.close()
