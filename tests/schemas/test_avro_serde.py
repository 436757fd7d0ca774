"""Our client's caching and the framing rules of the serde."""

import io
import json
import struct

import fastavro
import pytest

from schemas import catalog
from schemas.client import RegistryClient, RegistryError
from schemas.serde import (
    UNDECODABLE,
    AvroDeserializer,
    AvroSerializer,
    SerializationError,
    frame,
    frame_columns,
    frame_problem,
    frame_schema_id,
    parse_schema,
    topic_subject,
    unframe,
)

AUDIT = catalog.load_str("AuditEvent")
EVENT = {
    "tier": "producer",
    "host": "h1",
    "service": "svc",
    "topic": "clicks",
    "window_start_ms": 1_700_000_400_000,
    "window_ms": 600_000,
    "count": 3,
    "emitted_at_ms": 1_700_001_000_123,
}


@pytest.fixture
def client(running_registry):
    with RegistryClient(running_registry.url) as c:
        requests = []
        c._http.event_hooks["request"].append(lambda request: requests.append(request.url.path))
        c.requests = requests
        yield c


def test_frame_layout():
    data = frame(258, b"body")
    assert data == b"\x00\x00\x00\x01\x02body"
    schema_id, body = unframe(data)
    assert (schema_id, bytes(body)) == (258, b"body")


@pytest.mark.parametrize("data", [b"", b"\x00\x00\x00", b"\x01\x00\x00\x00\x01xx"])
def test_bad_frames_are_refused(data):
    with pytest.raises(SerializationError):
        unframe(data)


def test_topic_name_strategy():
    assert topic_subject("clicks") == "clicks-value"
    assert topic_subject("clicks", is_key=True) == "clicks-key"


def test_serializer_registers_once_per_subject(client):
    serialize = AvroSerializer(client, AUDIT)
    first = serialize(EVENT, "_audit")
    for _ in range(5):
        assert serialize(EVENT, "_audit") == first
    assert client.requests == ["/subjects/_audit-value/versions"]
    serialize(EVENT, "_audit_copy")
    assert client.requests[-1] == "/subjects/_audit_copy-value/versions"
    assert unframe(first)[0] == unframe(serialize(EVENT, "_audit_copy"))[0]


def test_deserializer_fetches_each_schema_id_once(client):
    data = AvroSerializer(client, AUDIT)(EVENT, "_audit")
    client.requests.clear()
    deserialize = AvroDeserializer(client)
    decoded = [deserialize(data) for _ in range(5)]
    assert client.requests == [f"/schemas/ids/{unframe(data)[0]}"]
    assert decoded[0]["count"] == 3
    assert int(decoded[0]["emitted_at_ms"].timestamp() * 1000) == EVENT["emitted_at_ms"]


def test_latest_cache_expires(running_registry):
    with (
        RegistryClient(running_registry.url, latest_ttl=3600) as cached,
        RegistryClient(running_registry.url, latest_ttl=0) as fresh,
    ):
        cached.set_compatibility("NONE", "a-value")
        cached.register("a-value", AUDIT)
        assert cached.latest("a-value").version == 1
        cached.register("a-value", catalog.load_str("ClickEvent"))
        assert cached.latest("a-value").version == 1  # still cached
        assert fresh.latest("a-value").version == 2


def test_serializer_refuses_values_that_do_not_match(client):
    with pytest.raises(SerializationError):
        AvroSerializer(client, AUDIT)({"tier": "producer"}, "_audit")


def test_unknown_schema_id_in_a_frame(client):
    with pytest.raises(RegistryError) as unknown:
        AvroDeserializer(client)(frame(4242, b""))
    assert (unknown.value.status, unknown.value.error_code) == (404, 40403)


def test_truncated_body_is_a_serialization_error(client):
    data = AvroSerializer(client, AUDIT)(EVENT, "_audit")
    with pytest.raises(SerializationError):
        AvroDeserializer(client)(data[:-3])


def test_client_compatibility_calls(client):
    client.register("pv-value", catalog.load_str("PageViewEvent.v1"))
    assert client.compatibility() == "BACKWARD"
    assert client.compatibility("pv-value") == "BACKWARD"  # falls back to global
    ok, reasons = client.test_compatibility("pv-value", catalog.load_str("PageViewEvent.v2"))
    assert ok and reasons == []
    ok, reasons = client.test_compatibility(
        "pv-value", catalog.load_str("PageViewEvent.required-field")
    )
    assert not ok and "session_id" in reasons[0]
    assert client.lookup("pv-value", catalog.load_str("PageViewEvent.v1")).version == 1
    assert client.subjects() == ["pv-value"]
    assert client.versions("pv-value") == [1]
    assert client.delete_subject("pv-value") == [1]
    assert client.delete_subject("pv-value", permanent=True) == [1]


def test_struct_header_is_big_endian():
    assert frame(1, b"")[1:] == struct.pack(">I", 1)


def test_frame_problems_name_the_reason():
    assert frame_problem(frame(7, b"x")) is None and frame_schema_id(frame(7, b"x")) == 7
    assert frame_problem(b"\x00\x00\x01") == "not Confluent framing: 3 bytes, need at least 5"
    assert frame_problem(b"\x01" + bytes(5)) == "not Confluent framing: magic byte 1, expected 0"
    assert frame_schema_id(None) is None and frame_schema_id(b"\x02" + bytes(5)) is None
    # Confluent writes the id as a Java int: signed.
    assert unframe(b"\x00\xff\xff\xff\xff")[0] == -1


def test_frame_columns_read_a_chunk_as_unframe_reads_each_value():
    import pyarrow as pa

    values = [frame(258, b"body"), b"\x00\x00\x01", None, b"\x01" + bytes(6), frame(2**31 - 1, b"")]
    sizes = [0 if v is None else len(v) for v in values]
    data = pa.array(list(b"".join(v or b"" for v in values) + bytes(8)), pa.uint8())
    starts = pa.array([sum(sizes[:i]) for i in range(len(values))], pa.int64())
    ends = pa.array([sum(sizes[: i + 1]) for i in range(len(values))], pa.int64())
    ids, unframed = frame_columns(data, starts, ends)
    assert ids.to_pylist() == [frame_schema_id(v) for v in values]
    assert unframed.to_pylist() == [frame_problem(v) is not None for v in values]


def _body(schema: dict, value) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parse_schema(schema), value)
    return out.getvalue()


STAMPED = {
    "type": "record",
    "name": "Stamped",
    "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "note", "type": ["null", "string"]},
    ],
}
GOOD = {
    "at": 1_700_000_000_000,
    "id": "6f1c8a52-2d0e-4a4e-9d4e-6f6b8d1e2a3b",
    "kind": "B",
    "note": "n",
}


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(_body(STAMPED, GOOD)[:-3], id="truncated"),
        pytest.param(b"", id="empty"),
        pytest.param(b"\xff" * 12, id="garbage varint"),
        pytest.param(_body({"type": "long"}, 2**62) + b"\x02x", id="timestamp beyond datetime"),
        pytest.param(_body({"type": "long"}, 0) + b"\x06abc\x00\x00", id="malformed uuid"),
        pytest.param(_body({"type": "long"}, 0) + b"\x04\xff\xfe", id="not UTF-8"),
        pytest.param(_body(STAMPED, GOOD)[:-4] + b"\x09", id="enum index out of range"),
    ],
)
def test_undecodable_bodies_are_serialization_errors(client, body):
    schema_id = client.register("stamped-value", json.dumps(STAMPED))
    with pytest.raises(SerializationError):
        AvroDeserializer(client)(frame(schema_id, body))


def test_a_body_of_another_schema_is_a_serialization_error(client):
    """Read as a reader schema it cannot be resolved to: SchemaResolutionError inside."""
    schema_id = client.register("stamped-value", json.dumps(STAMPED))
    other = {**STAMPED, "fields": [{"name": "at", "type": "string"}]}
    with pytest.raises(SerializationError):
        AvroDeserializer(client, reader_schema=other)(frame(schema_id, _body(STAMPED, GOOD)))


def test_undecodable_is_the_row_decoders_definition_too():
    from ingest.decoders import rowwise

    assert rowwise.UNDECODABLE is UNDECODABLE
    assert TypeError not in UNDECODABLE and KeyError not in UNDECODABLE
