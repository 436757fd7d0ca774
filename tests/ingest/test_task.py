"""One map task against a real broker and registry, writing to a local root."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.client.producer import Producer
from broker.util.clock import HOUR_MS, MINUTE_MS
from ingest.layout import new_run_id
from ingest.plan import TaskSpec
from ingest.task import TaskSettings, run_task
from schemas import catalog
from schemas.client import RegistryClient, RegistrySettings
from schemas.samples import events
from schemas.serde import AvroSerializer

T0 = 1_790_000_000_000 - 1_790_000_000_000 % HOUR_MS  # an hour boundary


@pytest.fixture(scope="module")
def produced(broker, registry):
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic("task-views", 1)])
    client = RegistryClient(registry.url)
    v1 = AvroSerializer(client, catalog.load_str("PageViewEvent.v1"))
    v3 = AvroSerializer(client, catalog.load_str("PageViewEvent.v3"))
    sent = []
    with Producer(broker.bootstrap, linger_ms=5, compression="lz4") as producer:
        for i, event in enumerate(
            events("page-views", 600, T0, T0 + 3 * HOUR_MS, page_view_version=1)
        ):
            # v1 first: the registry (BACKWARD) takes v1 then v3, not the reverse.
            value = (
                v1(event, "task-views")
                if i % 2 == 0
                else v3(dict(event, referrer=None), "task-views")
            )
            if i % 100 == 7:
                value = b"not avro at all"
            producer.send(
                "task-views",
                value,
                key=str(i).encode(),
                partition=0,
                timestamp_ms=event["header"]["time"],
            )
            sent.append((i, event))
        producer.flush()
    return sent


def test_task_loads_its_range_into_hourly_staged_files(tmp_path, broker, registry, produced):
    run = new_run_id()
    settings = TaskSettings(
        run,
        (broker.bootstrap,),
        RegistrySettings(registry.url),
        str(tmp_path),
        window_ms=10 * MINUTE_MS,
    )
    result = run_task(TaskSpec("task-views", 0, 50, 550), settings, attempt=0)
    assert (result.start, result.end) == (50, 550)
    assert result.balances
    assert result.quarantined == 5  # offsets 107, 207, ... 507
    assert result.loaded == 495
    assert sum(result.windows.values()) == 500
    assert sum(result.quarantined_windows.values()) == 5
    hours = sorted((f.dt, f.hr) for f in result.files)
    assert len(hours) == 3, hours
    offsets = []
    for f in result.files:
        assert f.staged.startswith(f"_runs/{run}/staging/task-views+0+50/attempt-0/")
        assert f.final == f"data/task-views/dt={f.dt}/hr={f.hr}/task-views+0+50+550+{run}.parquet"
        table = pq.read_table(tmp_path / f.staged)
        assert table.num_rows == f.records
        offsets += table.column("_kafka_offset").to_pylist()
        # Every row's event time falls in its file's hour.
        hrs = {
            t.strftime("%H")
            for t in table.column("header").combine_chunks().field("time").to_pylist()
        }
        assert hrs == {f.hr}
    assert sorted(offsets) == [o for o in range(50, 550) if o % 100 != 7]
    (err,) = result.error_files
    lines = [json.loads(x) for x in (tmp_path / err.staged).read_text().splitlines()]
    assert [e["offset"] for e in lines] == [107, 207, 307, 407, 507]


def test_fetches_ending_mid_batch_over_every_codec_balance_the_ledger(tmp_path, broker, registry):
    """The column-wise parse of fetches (broker/records/columnar.py) on a real broker:
    batches of every codec, fetches of ~2 KB that end inside batches (records
    straddle fetch boundaries), a range starting and ending inside batches; every
    offset is loaded or quarantined exactly once, in order."""
    topic = "task-codecs"
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    serialize = AvroSerializer(RegistryClient(registry.url), catalog.load_str("PageViewEvent.v1"))
    sent = list(events("page-views", 400, T0, T0 + HOUR_MS, page_view_version=1))
    for n, codec in enumerate(("gzip", "snappy", "zstd", "none")):
        with Producer(broker.bootstrap, linger_ms=20, compression=codec) as producer:
            for i in range(n * 100, n * 100 + 100):
                value = b"\x00bad" if i % 37 == 0 else serialize(sent[i], topic)
                producer.send(topic, value, partition=0, timestamp_ms=sent[i]["header"]["time"])
            producer.flush()
    settings = TaskSettings(
        new_run_id(),
        (broker.bootstrap,),
        RegistrySettings(registry.url),
        str(tmp_path),
        fetch_bytes=2048,
    )
    result = run_task(TaskSpec(topic, 0, 13, 391), settings, attempt=0)
    assert result.balances and (result.start, result.end) == (13, 391)
    bad = [o for o in range(13, 391) if o % 37 == 0]
    assert result.quarantined == len(bad) and result.skipped == 0
    offsets = []
    for f in sorted(result.files, key=lambda f: f.final):
        offsets += pq.read_table(tmp_path / f.staged).column("_kafka_offset").to_pylist()
    assert offsets == [o for o in range(13, 391) if o % 37]
    assert sum(result.windows.values()) == 378
