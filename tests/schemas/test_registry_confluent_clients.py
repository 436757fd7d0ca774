"""Confluent's own Python client, serializer and deserializer, unmodified, against
our registry; and our serde against theirs in both directions."""

import uuid
from datetime import UTC, datetime

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as ConfluentDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as ConfluentSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from schemas import catalog
from schemas.client import RegistryClient
from schemas.serde import AvroDeserializer, AvroSerializer, unframe

TOPIC = "page-views"
CTX = SerializationContext(TOPIC, MessageField.VALUE)
WHEN = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)


def page_view(n: int, **extra) -> dict:
    return {
        "header": {
            "time": WHEN,
            "host": f"web-{n % 3}",
            "service": "frontend",
            "event_id": uuid.uuid4(),
        },
        "member_id": n,
        "page_key": "feed",
        "page_url": f"/feed?page={n}",
        **extra,
    }


@pytest.fixture
def confluent(running_registry):
    return SchemaRegistryClient({"url": running_registry.url})


@pytest.fixture
def ours(running_registry):
    with RegistryClient(running_registry.url) as client:
        yield client


def test_confluent_client_api_against_our_registry(confluent):
    v1 = Schema(catalog.load_str("PageViewEvent.v1"), "AVRO")
    v2 = Schema(catalog.load_str("PageViewEvent.v2"), "AVRO")
    id1 = confluent.register_schema("pv-value", v1)
    id2 = confluent.register_schema("pv-value", v2)
    assert id1 != id2
    assert confluent.get_subjects() == ["pv-value"]
    assert confluent.get_versions("pv-value") == [1, 2]
    latest = confluent.get_latest_version("pv-value")
    assert (latest.schema_id, latest.version, latest.subject) == (id2, 2, "pv-value")
    assert confluent.get_version("pv-value", 1).schema_id == id1
    assert confluent.lookup_schema("pv-value", v1).version == 1
    assert confluent.get_schema(id1).schema_type == "AVRO"
    assert confluent.get_compatibility() == "BACKWARD"
    confluent.set_compatibility("pv-value", "FULL")
    assert confluent.get_compatibility("pv-value") == "FULL"
    assert confluent.test_compatibility("pv-value", v1) is True
    incompatible = Schema(catalog.load_str("PageViewEvent.required-field"), "AVRO")
    assert confluent.test_compatibility("pv-value", incompatible) is False
    with pytest.raises(SchemaRegistryError) as refused:
        confluent.register_schema("pv-value", incompatible)
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    assert confluent.get_schema_types() == ["AVRO"]
    assert confluent.delete_version("pv-value", 2) == 2
    assert confluent.delete_subject("pv-value") == [1]
    assert confluent.delete_subject("pv-value", permanent=True) == [1, 2]
    with pytest.raises(SchemaRegistryError) as missing:
        confluent.get_versions("pv-value")
    assert missing.value.error_code == 40401


def test_confluent_error_codes_reach_the_confluent_client(confluent):
    with pytest.raises(SchemaRegistryError) as invalid:
        confluent.register_schema("x-value", Schema('{"type": "record", "name": "R"}', "AVRO"))
    assert (invalid.value.http_status_code, invalid.value.error_code) == (422, 42201)
    with pytest.raises(SchemaRegistryError) as unknown:
        confluent.get_schema(12345)
    assert (unknown.value.http_status_code, unknown.value.error_code) == (404, 40403)


def test_confluent_serializer_then_our_deserializer(confluent, ours):
    serialize = ConfluentSerializer(confluent, catalog.load_str("PageViewEvent.v1"))
    deserialize = AvroDeserializer(ours)
    records = [page_view(n) for n in range(20)]
    for record in records:
        data = serialize(record, CTX)
        schema_id, _ = unframe(data)
        assert confluent.get_latest_version(f"{TOPIC}-value").schema_id == schema_id
        assert deserialize(data, TOPIC) == record


def test_our_serializer_then_confluent_deserializer(confluent, ours):
    serialize = AvroSerializer(ours, catalog.load_str("PageViewEvent.v2"))
    deserialize = ConfluentDeserializer(confluent)
    for n in range(20):
        record = page_view(n, referrer=None if n % 2 else f"https://example.com/{n}")
        data = serialize(record, TOPIC)
        assert data[0] == 0
        assert deserialize(data, CTX) == record
    # Registered under the TopicNameStrategy subject.
    assert confluent.get_subjects() == [f"{TOPIC}-value"]


def test_both_serializers_agree_on_id_and_bytes(confluent, ours):
    record = page_view(7)
    theirs = ConfluentSerializer(confluent, catalog.load_str("PageViewEvent.v1"))(record, CTX)
    mine = AvroSerializer(ours, catalog.load_str("PageViewEvent.v1"))(record, TOPIC)
    assert mine == theirs


def test_older_data_projects_onto_the_latest_schema(confluent, ours):
    # v1 data written by Confluent's serializer, then the subject evolves to v3.
    v1_data = ConfluentSerializer(confluent, catalog.load_str("PageViewEvent.v1"))(
        page_view(1), CTX
    )
    v2_data = AvroSerializer(ours, catalog.load_str("PageViewEvent.v2"))(
        page_view(2, referrer="r"), TOPIC
    )
    v3_data = AvroSerializer(ours, catalog.load_str("PageViewEvent.v3"))(
        page_view(2**40, referrer=None), TOPIC
    )
    assert len({unframe(d)[0] for d in (v1_data, v2_data, v3_data)}) == 3

    latest = AvroDeserializer(ours, use_latest=True)
    shapes = [latest(d, TOPIC) for d in (v1_data, v2_data, v3_data)]
    assert {tuple(s) for s in shapes} == {tuple(page_view(0, referrer=None))}
    assert [s["referrer"] for s in shapes] == [None, "r", None]
    assert [s["member_id"] for s in shapes] == [1, 2, 2**40]

    # A fixed older reader drops the newer fields.
    as_v1 = AvroDeserializer(ours, reader_schema=catalog.load_str("PageViewEvent.v1"))
    assert "referrer" not in as_v1(v2_data)
    # ...but cannot read a long that only fits v3, as Avro resolution says.
    from schemas.serde import SerializationError

    with pytest.raises(SerializationError):
        as_v1(v3_data)


def test_serializer_without_auto_register_looks_the_schema_up(ours, confluent):
    from schemas.client import RegistryError

    serialize = AvroSerializer(ours, catalog.load_str("AuditEvent"), auto_register=False)
    with pytest.raises(RegistryError) as missing:
        serialize({}, "_audit")
    assert missing.value.error_code == 40401
    schema_id = confluent.register_schema(
        "_audit-value", Schema(catalog.load_str("AuditEvent"), "AVRO")
    )
    event = {
        "tier": "producer",
        "host": "h",
        "service": "s",
        "topic": "page-views",
        "window_start_ms": WHEN,
        "window_ms": 600_000,
        "count": 42,
        "emitted_at_ms": WHEN,
    }
    data = serialize(event, "_audit")
    assert unframe(data)[0] == schema_id
    assert (
        ConfluentDeserializer(confluent)(data, SerializationContext("_audit", MessageField.VALUE))
        == event
    )
