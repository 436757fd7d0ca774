"""The registry's `_schemas` topic is compacted (as Confluent creates it) while schemas are
registered, configured and deleted; a registry replaying the compacted topic serves
exactly what the first one served, before and after the tombstones go."""

from __future__ import annotations

import json
import time

import httpx

from broker.client.simple_consumer import SimpleConsumer
from broker.log.checkpoint import CLEANER_OFFSET_FILE, read_checkpoint
from broker.records.batch import iter_records
from schemas.store import KafkaTopicStore

# Small segments rolled often and a low ratio, so the cleaner works during the test.
BROKER = {
    "log.segment.bytes": "2048",
    "log.roll.ms": "200",
    "log.cleaner.min.cleanable.ratio": "0.05",
    "log.cleaner.backoff.ms": "100",
    "log.cleaner.delete.retention.ms": "2000",
    "log.segment.delete.delay.ms": "0",
}


def schema(name: str, fields: int) -> str:
    return json.dumps(
        {
            "type": "record",
            "name": name,
            "fields": [{"name": f"f{i}", "type": "int", "default": 0} for i in range(fields)],
        }
    )


def churn(http: httpx.Client, subjects: int) -> int:
    """Many entries per key: configs changed back and forth, versions registered and
    soft-deleted, subjects deleted for good (tombstones), subjects deleted and reused.
    Returns the highest id handed out (the last subject's, deleted for good)."""
    highest = 0
    http.put("/config", json={"compatibility": "NONE"}).raise_for_status()
    for i in range(subjects):
        subject = f"s{i}-value"
        for level in ("FULL", "BACKWARD", "NONE"):
            http.put(f"/config/{subject}", json={"compatibility": level}).raise_for_status()
        for v in range(4):
            answer = http.post(
                f"/subjects/{subject}/versions", json={"schema": schema(f"R{i}", v + 1)}
            )
            highest = max(highest, answer.raise_for_status().json()["id"])
        if i % 3 == 0:
            http.delete(f"/subjects/{subject}/versions/2").raise_for_status()
        if i % 4 == 1:
            http.delete(f"/subjects/{subject}").raise_for_status()
            http.delete(f"/subjects/{subject}?permanent=true").raise_for_status()
        elif i % 5 == 2:
            http.delete(f"/subjects/{subject}").raise_for_status()
            answer = http.post(
                f"/subjects/{subject}/versions", json={"schema": schema(f"R{i}b", 9)}
            )
            highest = max(highest, answer.raise_for_status().json()["id"])
    http.put("/config", json={"compatibility": "FULL"}).raise_for_status()
    return highest


def schemas_topic(bootstrap: str) -> tuple[int, int]:
    """(records a reader gets, log end offset) of `_schemas`."""
    with SimpleConsumer(bootstrap) as consumer:
        end = consumer.latest_offset("_schemas", 0)
        count, position = 0, 0
        while position < end:
            result = consumer.fetch("_schemas", 0, position)
            count += sum(1 for _ in iter_records(result.records_bytes, position))
            position = result.next_offset
    return count, end


def store(bootstrap: str) -> KafkaTopicStore:
    return KafkaTopicStore(bootstrap, "_schemas", timeout_ms=10_000, init_timeout_ms=30_000)


def test_a_compacted_schemas_topic_replays_to_the_same_registry(
    broker_factory, registry_server, registry_snapshot
):
    broker = broker_factory(BROKER)
    first = store(broker.bootstrap)
    with registry_server(first) as url, httpx.Client(base_url=url, timeout=30) as http:
        highest = churn(http, 30)
        before = registry_snapshot(http)
        ids = {v["id"] for s in before["subjects"].values() for v in s["versions"]}
    first.close()
    # Roll the last segment (a write after log.roll.ms), then wait for the cleaner.
    time.sleep(0.3)
    again = store(broker.bootstrap)
    with registry_server(again) as url, httpx.Client(base_url=url, timeout=30) as http:
        http.put("/config", json={"compatibility": "FULL"}).raise_for_status()
    again.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        kept, end = schemas_topic(broker.bootstrap)
        if kept < end / 2:
            break
        time.sleep(0.3)
    assert kept < end / 2, f"_schemas compacted: {kept} records of {end} offsets"
    assert ("_schemas", 0) in read_checkpoint(broker.log_dir / CLEANER_OFFSET_FILE)

    def replayed() -> dict:
        replay = store(broker.bootstrap)
        with registry_server(replay) as url, httpx.Client(base_url=url, timeout=30) as http:
            seen = registry_snapshot(http)
            for schema_id in ids:
                assert http.get(f"/schemas/ids/{schema_id}").status_code == 200
        replay.close()
        return seen

    assert replayed() == before
    # Past log.cleaner.delete.retention.ms the tombstones of the permanent deletes go too.
    time.sleep(2.5)
    deadline = time.monotonic() + 30
    while schemas_topic(broker.bootstrap)[0] >= kept and time.monotonic() < deadline:
        time.sleep(0.3)
    assert schemas_topic(broker.bootstrap)[0] < kept
    assert replayed() == before
    # The highest id was deleted for good and its entries compacted away: a replay still
    # knows it was handed out, so a new schema gets the next one.
    assert highest not in ids
    last = store(broker.bootstrap)
    with registry_server(last) as url, httpx.Client(base_url=url, timeout=30) as http:
        answer = http.post("/subjects/new-value/versions", json={"schema": schema("New", 1)})
        assert answer.json() == {"id": highest + 1}
    last.close()
