"""Restart durability on our broker: the registry keeps its log in the `_schemas`
topic, so stopping and starting the registry, and the broker under it, changes
no subject, version, id or config."""

import signal

import httpx
import pytest

from broker.client.admin import AdminClient
from broker.client.producer import Producer
from broker.processes import RegistryProcess
from schemas import catalog
from schemas.store import KafkaTopicStore, StoreError
from tests.helpers.cluster import NO_GROUP_DELAY

SCHEMAS = {name: catalog.load_str(name) for name in catalog.names()}


def kafka_store(bootstrap: str) -> KafkaTopicStore:
    return KafkaTopicStore(bootstrap, "_schemas", timeout_ms=10_000, init_timeout_ms=30_000)


def populate(http: httpx.Client) -> dict[str, int]:
    ids = {}
    http.put(
        "/config/page-views-value", json={"compatibility": "FULL_TRANSITIVE"}
    ).raise_for_status()
    http.put("/config/page-views-value", json={"compatibility": "BACKWARD"}).raise_for_status()
    for name in ("PageViewEvent.v1", "PageViewEvent.v2", "PageViewEvent.v3"):
        answer = http.post("/subjects/page-views-value/versions", json={"schema": SCHEMAS[name]})
        ids[name] = answer.raise_for_status().json()["id"]
    for topic, name in (
        ("searches", "SearchEvent"),
        ("clicks", "ClickEvent"),
        ("_audit", "AuditEvent"),
    ):
        answer = http.post(f"/subjects/{topic}-value/versions", json={"schema": SCHEMAS[name]})
        ids[name] = answer.raise_for_status().json()["id"]
    http.post(
        "/subjects/page-views-copy-value/versions", json={"schema": SCHEMAS["PageViewEvent.v1"]}
    )
    http.delete("/subjects/page-views-value/versions/2").raise_for_status()
    http.delete("/subjects/clicks-value").raise_for_status()
    http.delete("/subjects/clicks-value?permanent=true").raise_for_status()
    http.delete("/subjects/searches-value").raise_for_status()
    http.put("/config", json={"compatibility": "FULL"}).raise_for_status()
    return ids


def test_registry_and_broker_restart_keep_everything(
    broker_factory, registry_server, registry_snapshot
):
    broker = broker_factory()
    store = kafka_store(broker.bootstrap)
    with registry_server(store) as url, httpx.Client(base_url=url, timeout=30) as http:
        ids = populate(http)
        before = registry_snapshot(http)
    store.close()
    assert before["subjects"]["page-views-value"]["live"] == [1, 3]
    assert "clicks-value" not in before["subjects"]

    # Restart the registry alone, then the broker under it too.
    store = kafka_store(broker.bootstrap)
    with registry_server(store) as url, httpx.Client(base_url=url, timeout=30) as http:
        assert registry_snapshot(http) == before
    store.close()

    broker.stop()
    broker = broker_factory(log_dir=broker.log_dir, port=broker.port)
    store = kafka_store(broker.bootstrap)
    with registry_server(store) as url, httpx.Client(base_url=url, timeout=30) as http:
        assert registry_snapshot(http) == before
        for name, schema_id in ids.items():
            if name != "ClickEvent":  # permanently deleted with clicks-value
                assert http.get(f"/schemas/ids/{schema_id}").status_code == 200
        # New ids continue past every id ever given, including the hard-deleted one.
        answer = http.post(
            "/subjects/fresh-value/versions",
            json={"schema": '{"type":"record","name":"Fresh","fields":[]}'},
        )
        assert answer.json()["id"] == max(ids.values()) + 1
    store.close()


def test_store_creates_one_partition_and_replays_in_order(broker):
    store = KafkaTopicStore(broker.bootstrap, "_schemas_order", timeout_ms=10_000)
    assert list(store.replay()) == []  # creates the topic
    entries = [({"keytype": "CONFIG", "subject": f"s{i}", "magic": 0}, {"n": i}) for i in range(50)]
    entries.append((entries[3][0], None))  # a tombstone replays as a None value
    for key, value in entries:
        store.append(key, value)
    store.close()
    with AdminClient(broker.bootstrap) as admin:
        described = admin.describe_topics(["_schemas_order"])["_schemas_order"]
    assert len(described.partitions) == 1
    assert list(KafkaTopicStore(broker.bootstrap, "_schemas_order").replay()) == entries


def test_unreachable_broker_is_a_store_error():
    store = KafkaTopicStore("127.0.0.1:1", timeout_ms=1000, init_timeout_ms=1000)
    with pytest.raises(StoreError, match="cannot reach"):
        list(store.replay())
    with pytest.raises(StoreError):
        store.append({"keytype": "CONFIG", "subject": None, "magic": 0}, None)


def test_start_command_with_the_kafka_store(broker_factory, tmp_path):
    broker = broker_factory(NO_GROUP_DELAY)  # each start's election settles at once
    registry = RegistryProcess(
        tmp_path,
        settings={
            "kafkastore.bootstrap.servers": f"PLAINTEXT://{broker.bootstrap}",
            "kafkastore.timeout.ms": "10000",
        },
    )
    url = registry.url

    with registry:
        first = httpx.post(
            f"{url}/subjects/_audit-value/versions", json={"schema": SCHEMAS["AuditEvent"]}
        ).json()["id"]
        second = httpx.post(
            f"{url}/subjects/clicks-value/versions", json={"schema": SCHEMAS["ClickEvent"]}
        ).json()["id"]
        assert registry.stop(timeout_s=20) != -signal.SIGKILL  # it stopped on SIGTERM
    # ... past its clean-up: it left the group (its restart is elected without waiting
    # out the old member's session).
    assert "left the group: registry shutting down" in registry.log_text()
    with registry:
        assert httpx.get(f"{url}/subjects").json() == ["_audit-value", "clicks-value"]
        assert httpx.get(f"{url}/subjects/clicks-value/versions/latest").json()["id"] == second
        again = httpx.post(
            f"{url}/subjects/_audit-value/versions", json={"schema": SCHEMAS["AuditEvent"]}
        )
        assert again.json() == {"id": first}
        assert registry.stop(timeout_s=20) != -signal.SIGKILL


def test_records_no_registry_wrote_are_skipped_and_named(broker, registry_server, caplog):
    """Someone else's records in the store topic (not JSON; JSON the registry cannot use)
    stop no registry: they are logged with their offsets, the rest is served, ids go on."""
    store = KafkaTopicStore(broker.bootstrap, "_schemas_foreign", timeout_ms=10_000)
    with registry_server(store) as url, httpx.Client(base_url=url, timeout=30) as http:
        first = http.post("/subjects/a-value/versions", json={"schema": SCHEMAS["AuditEvent"]})
    with Producer(broker.bootstrap, acks=-1) as producer:
        producer.send("_schemas_foreign", b"not json", key=b"{broken").result(10)
        producer.send("_schemas_foreign", b'{"id": 7}', key=b'{"keytype": "SCHEMA"}').result(10)
    store.close()
    again = KafkaTopicStore(broker.bootstrap, "_schemas_foreign", timeout_ms=10_000)
    with registry_server(again) as url, httpx.Client(base_url=url, timeout=30) as http:
        assert http.get("/subjects").json() == ["a-value"]
        second = http.post("/subjects/c-value/versions", json={"schema": SCHEMAS["ClickEvent"]})
        assert second.json()["id"] == first.json()["id"] + 1
    again.close()
    skipped = [r.getMessage() for r in caplog.records if "skipping" in r.getMessage()]
    assert any("offset 1 " in m for m in skipped) and any("offset 2" in m for m in skipped)
