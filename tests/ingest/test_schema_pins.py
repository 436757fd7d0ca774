"""The run's target schemas pinned by the driver (ingest/schema_pins.py), against a real
broker and registry: tasks answer from the pins, write the schema the run was planned
with even when a newer version is registered mid-run, and reach the registry only for
what was not pinned."""

from __future__ import annotations

import httpx
import pyarrow.parquet as pq
import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.client.producer import Producer
from broker.util.clock import HOUR_MS
from ingest.layout import new_run_id
from ingest.plan import TaskSpec
from ingest.plugins import Choice, TopicPlugins
from ingest.schema_pins import PinnedRegistry, SchemaPins
from ingest.task import TaskSettings, run_task
from schemas import catalog
from schemas.client import RegistryClient, RegistrySettings
from schemas.samples import events
from schemas.serde import AvroSerializer, topic_subject

T0 = 1_790_000_000_000 - 1_790_000_000_000 % HOUR_MS
NOWHERE = RegistrySettings("http://127.0.0.1:1")  # nothing listens: any call fails


def _produce_v1(broker, registry, topic: str, count: int = 50) -> None:
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    serialize = AvroSerializer(RegistryClient(registry.url), catalog.load_str("PageViewEvent.v1"))
    with Producer(broker.bootstrap) as producer:
        for event in events("page-views", count, T0, T0 + HOUR_MS, page_view_version=1):
            producer.send(
                topic, serialize(event, topic), partition=0, timestamp_ms=event["header"]["time"]
            )
        producer.flush()


def test_pins_answer_without_the_registry(registry):
    client = RegistryClient(registry.url)
    schema_id = client.register("pins-a-value", catalog.load_str("PageViewEvent.v1"))
    pins = SchemaPins.resolve(client, ["pins-a-value", "pins-a-value"])
    pinned = PinnedRegistry(NOWHERE, pins)
    assert pinned.latest("pins-a-value").id == schema_id
    assert pinned.schema(schema_id) == client.schema(schema_id)
    assert not pinned.contacted


def test_what_was_not_pinned_is_asked_of_the_registry(registry):
    client = RegistryClient(registry.url)
    v1 = client.register("pins-b-value", catalog.load_str("PageViewEvent.v1"))
    pins = SchemaPins.resolve(client, ["pins-b-value"])
    v3 = client.register("pins-b-value", catalog.load_str("PageViewEvent.v3"))
    pinned = PinnedRegistry(RegistrySettings(registry.url), pins)
    assert pinned.latest("pins-b-value").id == v1  # the run keeps the version it planned with
    assert not pinned.contacted
    assert pinned.schema(v3) == client.schema(v3)  # an id the driver did not pin
    assert pinned.contacted
    pinned.close()


def test_an_unknown_subject_is_left_unpinned_and_a_registry_outage_raises(registry):
    pins = SchemaPins.resolve(RegistryClient(registry.url), ["pins-never-registered-value"])
    assert pins.latest == {}
    with pytest.raises(httpx.TransportError):
        SchemaPins.resolve(NOWHERE.client(), ["pins-a-value"])


def test_only_topics_decoded_through_the_registry_are_pinned():
    plugins = TopicPlugins(
        Choice("confluent-avro", "event-hour", "parquet"),
        (("decoder", "raw-logs", "raw"), ("decoder", "json-events", "json")),
    )
    assert plugins.registry_subjects(["views", "raw-logs", "json-events", "views"]) == [
        topic_subject("json-events"),
        topic_subject("views"),
    ]


def test_a_task_writes_the_pinned_schema_and_never_calls_the_registry(tmp_path, broker, registry):
    """Pinned at v1; v3 (an added field) registered after planning: the task still writes
    v1's columns, and with every writer id pinned it needs no registry at all (its
    settings point nowhere)."""
    topic = "pins-task-views"
    _produce_v1(broker, registry, topic)
    client = RegistryClient(registry.url)
    pins = SchemaPins.resolve(client, [topic_subject(topic)])
    client.register(topic_subject(topic), catalog.load_str("PageViewEvent.v3"))
    settings = TaskSettings(new_run_id(), (broker.bootstrap,), NOWHERE, str(tmp_path), schemas=pins)
    result = run_task(TaskSpec(topic, 0, 0, 50), settings)
    assert result.loaded == 50 and result.quarantined == 0
    for f in result.files:
        assert "referrer" not in pq.read_schema(tmp_path / f.staged).names
    # Pinned afresh (the next run), the task writes v3's columns.
    fresh = SchemaPins.resolve(client, [topic_subject(topic)])
    settings = TaskSettings(
        new_run_id(), (broker.bootstrap,), RegistrySettings(registry.url), str(tmp_path / "next"),
        schemas=fresh,
    )  # fmt: skip
    result = run_task(TaskSpec(topic, 0, 0, 50), settings)
    assert result.loaded == 50
    for f in result.files:
        assert "referrer" in pq.read_schema(tmp_path / "next" / f.staged).names
