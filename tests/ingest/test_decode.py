"""ConfluentAvroDecoder against a real registry (in-memory store, uvicorn on loopback):
projection of several writer versions onto the target, quarantine reasons, the
ledger (records in == decoded + quarantined), columnar == fastavro row by row."""

from __future__ import annotations

import io
import json
import random
import uuid
from decimal import Decimal

import fastavro
import pyarrow as pa
import pytest

from broker.records.batch import Record
from ingest.decoders import ConfluentAvroDecoder, JsonDecoder, RawDecoder
from ingest.decoders.rowwise import RowDecoder
from schemas import catalog
from schemas.canonical import parse
from schemas.client import RegistryClient
from schemas.serde import frame, parse_schema
from schemas.store import InMemoryStore
from tests.helpers.registry_server import start_registry

TOPIC = "page-views"
BASE_MS = 1_714_566_600_000


@pytest.fixture(scope="module")
def registry():
    server, _ = start_registry(InMemoryStore())
    with server as url, RegistryClient(url) as client:
        yield client


@pytest.fixture(scope="module")
def ids(registry):
    """Ids of PageViewEvent v1 and v3 (target: latest = v3) under the topic's subject."""
    subject = f"{TOPIC}-value"
    found = {
        name: registry.register(subject, catalog.load_str(name))
        for name in ("PageViewEvent.v1", "PageViewEvent.v2", "PageViewEvent.v3")
    }
    return found


def events(count: int, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    return [
        {
            "header": {
                "time": BASE_MS + i * 61_001,
                "host": f"web-{rng.randrange(40):02d}.example.com",
                "service": rng.choice(["frontend", "api", ""]),
                "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            },
            "member_id": rng.randrange(-1, 2**31 - 1),
            "page_key": rng.choice(["feed", "profile", "jobs", "ünïcødé ✓"]),
            "page_url": "https://www.example.com/" + "x" * rng.randrange(0, 300),
            "referrer": None if rng.random() < 0.5 else "https://ref.example.com/",
        }
        for i in range(count)
    ]


def encode(schema_name: str, value: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parse_schema(catalog.load_str(schema_name)), value)
    return out.getvalue()


def as_v1(event: dict) -> dict:
    return {k: v for k, v in event.items() if k != "referrer"}


def expected_row(event: dict, offset: int, schema_id: int, key: bytes | None) -> dict:
    """What the decoder must give for an event, in plain values (ms, not datetimes)."""
    return {
        **event,
        "_kafka_partition": 3,
        "_kafka_offset": offset,
        "_kafka_timestamp": BASE_MS + offset,
        "_kafka_key": key,
        "_schema_id": schema_id,
    }


def plain_rows(batch: pa.RecordBatch) -> list[dict]:
    """The batch as dicts with timestamps as epoch ms (comparable with the events)."""

    def plain(column):
        if pa.types.is_timestamp(column.type):
            return column.cast(pa.int64())
        if pa.types.is_struct(column.type):
            children = [plain(column.field(i)) for i in range(column.type.num_fields)]
            return pa.StructArray.from_arrays(
                children, names=[f.name for f in column.type], mask=column.is_null()
            )
        return column

    return pa.RecordBatch.from_arrays(
        [plain(c) for c in batch.columns], names=batch.schema.names
    ).to_pylist()


def mixed_records(ids: dict, count: int) -> tuple[list[Record], list[dict]]:
    """Records alternating v1 and v3 writers (some keyed), and the rows expected."""
    records, expected = [], []
    for offset, event in enumerate(events(count)):
        key = f"user-{offset}".encode() if offset % 3 == 0 else None
        if offset % 2:
            schema_id, body = ids["PageViewEvent.v1"], encode("PageViewEvent.v1", as_v1(event))
            event = {**event, "referrer": None}  # v1 rows get v3's default
        else:
            schema_id, body = ids["PageViewEvent.v3"], encode("PageViewEvent.v3", event)
        records.append(Record(offset, BASE_MS + offset, key, frame(schema_id, body), ()))
        expected.append(expected_row(event, offset, schema_id, key))
    return records, expected


@pytest.mark.parametrize("columnar", [True, False], ids=["columnar", "rows"])
def test_two_writer_versions_project_onto_the_latest(registry, ids, columnar):
    records, expected = mixed_records(ids, 2_000)
    decoder = ConfluentAvroDecoder(registry, TOPIC, columnar_decoding=columnar)
    assert decoder.target.canonical == parse(catalog.load_str("PageViewEvent.v3")).canonical
    chunk = decoder.decode(3, records)
    assert chunk.quarantined == []
    assert chunk.batch.schema == decoder.schema
    assert chunk.batch.schema.field("member_id").type == pa.int64()  # v1's int widened
    assert plain_rows(chunk.batch) == expected


def test_columnar_and_row_decoding_give_identical_batches(registry, ids):
    records, _ = mixed_records(ids, 3_000)
    a = ConfluentAvroDecoder(registry, TOPIC).decode(0, records).batch
    b = ConfluentAvroDecoder(registry, TOPIC, columnar_decoding=False).decode(0, records).batch
    assert a.equals(b)


def test_undecodable_records_are_quarantined_with_reasons(registry, ids):
    records, expected = mixed_records(ids, 40)
    good = records[0].value
    v3 = ids["PageViewEvent.v3"]
    broken = {
        5: (None, "null value"),
        6: (b"\x00\x00\x01", "not Confluent framing: 3 bytes, need at least 5"),
        7: (b"\x01" + good[1:], "not Confluent framing: magic byte 1, expected 0"),
        8: (frame(987_654, good[5:]), "unknown schema id 987654"),
        9: (good[:-4], "undecodable body: EOFError"),
        10: (good + b"\x00", "undecodable body: 1 bytes left after the value"),
        11: (frame(v3, b""), "undecodable body"),
        12: (frame(v3, b"\x80" * 12), "undecodable body"),
        # a string length far beyond the value
        13: (frame(v3, b"\x02\xfe\xff\xff\x0f"), "undecodable body"),
        # page_key not UTF-8
        14: (
            frame(
                v3,
                encode(
                    "PageViewEvent.v3", {**as_v1(events(1)[0]), "page_key": "ab", "referrer": None}
                ).replace(b"\x04ab", b"\x04\xff\xfe"),
            ),
            "undecodable body",
        ),
    }
    for offset, (value, _) in broken.items():
        records[offset] = records[offset]._replace(value=value)
    for columnar in (True, False):
        chunk = ConfluentAvroDecoder(registry, TOPIC, columnar_decoding=columnar).decode(3, records)
        assert chunk.count == len(records) == chunk.batch.num_rows + len(chunk.quarantined)
        got = {q.offset: q for q in chunk.quarantined}
        assert sorted(got) == sorted(broken)
        for offset, (value, reason) in broken.items():
            assert got[offset].reason.startswith(reason), (offset, got[offset].reason)
            assert got[offset].value == value  # raw bytes kept
            assert got[offset].key == records[offset].key
        assert got[8].schema_id == 987_654 and got[5].schema_id is None
        kept = [row for i, row in enumerate(expected) if i not in broken]
        assert plain_rows(chunk.batch) == kept


def test_writer_schema_not_resolvable_to_the_target(registry, ids):
    other = registry.register("elsewhere-value", catalog.load_str("SearchEvent"))
    records, _ = mixed_records(ids, 4)
    records[2] = records[2]._replace(value=frame(other, b"\x00\x00"))
    chunk = ConfluentAvroDecoder(registry, TOPIC).decode(0, records)
    (q,) = chunk.quarantined
    assert q.offset == 2 and q.schema_id == other
    assert q.reason.startswith(f"writer schema {other} not resolvable to the target")
    assert chunk.batch.num_rows == 3


def test_registry_outage_raises_instead_of_quarantining(ids):
    records, _ = mixed_records(ids, 2)
    target = catalog.load_str("PageViewEvent.v3")
    with RegistryClient("http://127.0.0.1:9", timeout=1) as dead:
        decoder = ConfluentAvroDecoder(dead, TOPIC, target_schema=target)
        with pytest.raises(Exception) as err:
            decoder.decode(0, records)
    assert "quarantine" not in str(err.value)


def test_empty_and_all_bad_chunks(registry, ids):
    decoder = ConfluentAvroDecoder(registry, TOPIC)
    empty = decoder.decode(0, [])
    assert empty.batch.num_rows == 0 and empty.batch.schema == decoder.schema
    bad = decoder.decode(0, [Record(7, BASE_MS, None, b"junk", ())])
    assert bad.batch.num_rows == 0 and [q.offset for q in bad.quarantined] == [7]


def test_corrupted_bodies_give_the_same_answer_both_ways(registry, ids):
    """Random byte flips and cuts: the columnar decoder (with its fastavro re-read of
    suspect rows) keeps and rejects exactly what fastavro row by row does."""
    records, _ = mixed_records(ids, 1_500)
    rng = random.Random(5)
    for i in range(0, len(records), 3):
        value = bytearray(records[i].value)
        if rng.random() < 0.5:
            for _ in range(rng.randrange(1, 4)):
                value[rng.randrange(5, len(value))] = rng.randrange(256)
        else:
            del value[rng.randrange(5, len(value)) :]
        records[i] = records[i]._replace(value=bytes(value))
    a = ConfluentAvroDecoder(registry, TOPIC).decode(1, records)
    b = ConfluentAvroDecoder(registry, TOPIC, columnar_decoding=False).decode(1, records)
    assert a.batch.equals(b.batch)
    assert a.quarantined == b.quarantined
    assert a.count == b.count == len(records)
    assert len(a.quarantined) > 100


RICH_WRITER = {
    "type": "record",
    "name": "Rich",
    "namespace": "t",
    "fields": [
        {"name": "flag", "type": "boolean"},
        {"name": "small", "type": "int"},
        {"name": "ratio", "type": "float"},
        {
            "name": "dropped",
            "type": {
                "type": "record",
                "name": "Gone",
                "fields": [{"name": "s", "type": "string"}, {"name": "d", "type": "double"}],
            },
        },
        {
            "name": "colour",
            "type": {"type": "enum", "name": "Colour", "symbols": ["RED", "GREEN", "BLUE"]},
        },
        {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
        {"name": "blob", "type": "bytes"},
        {"name": "text", "type": "string"},
        {
            "name": "maybe",
            "type": [
                "null",
                {"type": "record", "name": "Inner", "fields": [{"name": "n", "type": "long"}]},
            ],
        },
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "micros", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "either", "type": ["null", "int"]},
    ],
}
RICH_READER = {
    "type": "record",
    "name": "Rich",
    "namespace": "t",
    "fields": [
        {"name": "text", "type": "bytes"},  # string -> bytes
        {"name": "small", "type": "double"},  # int -> double
        {"name": "ratio", "type": "double"},  # float -> double
        {"name": "flag", "type": "boolean"},
        {
            "name": "colour",
            "type": {
                "type": "enum",
                "name": "Colour",
                "symbols": ["GREEN", "RED"],
                "default": "GREEN",
            },
        },
        {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
        {"name": "blob", "type": "string"},  # bytes -> string (UTF-8 checked)
        {
            "name": "maybe",
            "type": [
                "null",
                {"type": "record", "name": "Inner", "fields": [{"name": "n", "type": "long"}]},
            ],
        },
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "micros", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "either", "type": ["null", "long"]},
        {"name": "added", "type": "string", "default": "none"},
        {"name": "added_opt", "type": ["null", "int"], "default": None},
    ],
}


def rich_values(count: int) -> list[dict]:
    rng = random.Random(3)
    return [
        {
            "flag": rng.random() < 0.5,
            "small": rng.randrange(-(2**31), 2**31),
            "ratio": rng.choice([0.5, -1.25, 3.0e10]),
            "dropped": {"s": "x" * rng.randrange(20), "d": rng.random()},
            "colour": rng.choice(["RED", "GREEN", "BLUE"]),
            "digest": bytes(rng.randrange(256) for _ in range(4)),
            "blob": rng.choice([b"", b"plain", "ü".encode()]),
            "text": "t" * rng.randrange(30),
            "maybe": None if rng.random() < 0.3 else {"n": rng.randrange(-(2**63), 2**63)},
            "day": rng.randrange(-1000, 30000),
            "micros": rng.randrange(-(2**50), 2**50),
            "either": None if rng.random() < 0.5 else rng.randrange(-(2**31), 2**31),
        }
        for _ in range(count)
    ]


def test_projection_of_every_primitive_promotion_enum_fixed_and_nested_union(registry):
    writer_id = registry.register("rich-value", json.dumps(RICH_WRITER))
    writer = parse_schema(RICH_WRITER)
    records = []
    for offset, value in enumerate(rich_values(500)):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, writer, value)
        records.append(Record(offset, BASE_MS, None, frame(writer_id, out.getvalue()), ()))
    columnar = ConfluentAvroDecoder(registry, "rich", target_schema=json.dumps(RICH_READER))
    rows = ConfluentAvroDecoder(
        registry, "rich", target_schema=json.dumps(RICH_READER), columnar_decoding=False
    )
    a, b = columnar.decode(0, records), rows.decode(0, records)
    # BLUE has no reader symbol but the reader enum has a default: mapped, not refused.
    assert a.quarantined == b.quarantined == []
    assert a.batch.equals(b.batch)
    got = a.batch.to_pylist()
    for value, row in zip(rich_values(500), got, strict=True):
        assert row["text"] == value["text"].encode()
        assert row["small"] == float(value["small"])
        assert row["colour"] == ("GREEN" if value["colour"] == "BLUE" else value["colour"])
        assert row["blob"] == value["blob"].decode()
        assert row["maybe"] == value["maybe"]
        assert row["either"] == value["either"]
        assert row["added"] == "none" and row["added_opt"] is None
        assert "dropped" not in row
    assert a.batch.schema.field("day").type == pa.date32()
    assert a.batch.schema.field("micros").type == pa.timestamp("us", tz="UTC")


def test_arrays_maps_and_decimals_take_the_columnar_path(registry):
    schema = {
        "type": "record",
        "name": "Tagged",
        "fields": [
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "attrs", "type": {"type": "map", "values": "long"}},
            {
                "name": "price",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            },
        ],
    }
    schema_id = registry.register("tagged-value", json.dumps(schema))
    values = [
        {"tags": ["a", "b"][: i % 3], "attrs": {"k": i}, "price": Decimal(i * 101 - 500) / 100}
        for i in range(10)
    ]
    records = []
    for i, value in enumerate(values):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parse_schema(schema), value)
        records.append(Record(i, BASE_MS, None, frame(schema_id, out.getvalue()), ()))
    # Two corrupt rows: a price with more digits than its precision, a cut-off map.
    records.append(Record(10, BASE_MS, None, frame(schema_id, b"\x00\x00\x08" + b"\x7f" * 4), ()))
    records.append(Record(11, BASE_MS, None, frame(schema_id, b"\x02\x02a\x00\x02"), ()))
    decoder = ConfluentAvroDecoder(registry, "tagged")
    chunk = decoder.decode(0, records)
    assert decoder._writer(schema_id).plan is not None
    assert chunk.batch.column("tags").to_pylist() == [v["tags"] for v in values]
    assert chunk.batch.column("attrs").to_pylist() == [[("k", i)] for i in range(10)]
    assert chunk.batch.column("price").to_pylist() == [v["price"] for v in values]
    assert [q.offset for q in chunk.quarantined] == [10, 11]
    rows = ConfluentAvroDecoder(registry, "tagged", columnar_decoding=False).decode(0, records)
    assert rows.batch.equals(chunk.batch)
    assert rows.quarantined == chunk.quarantined


def test_row_decoder_reports_trailing_bytes():
    schema = parse(catalog.load_str("PageViewEvent.v3"))
    body = encode("PageViewEvent.v3", events(1)[0])
    decoder = RowDecoder(schema, schema)
    assert decoder.read(body)["page_key"] == events(1)[0]["page_key"]
    with pytest.raises(ValueError, match="2 bytes left"):
        decoder.read(body + b"\x00\x00")


def test_decoding_a_million_records_in_chunks_keeps_memory_bounded(registry, ids):
    """1,000,000 records streamed through decode_stream: Arrow memory never holds
    more than a few chunks, and the process does not grow with the range."""
    import resource

    bodies = [frame(ids["PageViewEvent.v3"], encode("PageViewEvent.v3", e)) for e in events(64)]

    def fetched():  # as a fetch loop yields them: one at a time
        for offset in range(1_000_000):
            yield Record(offset, BASE_MS + offset, None, bodies[offset % 64], ())

    decoder = ConfluentAvroDecoder(registry, TOPIC, chunk_size=20_000)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    arrow_before = pa.total_allocated_bytes()
    peak_arrow, total, next_offset = 0, 0, 0
    for chunk in decoder.decode_stream(0, fetched()):
        peak_arrow = max(peak_arrow, pa.total_allocated_bytes() - arrow_before)
        assert chunk.quarantined == []
        offsets = chunk.batch.column("_kafka_offset")
        assert offsets[0].as_py() == next_offset
        next_offset = offsets[-1].as_py() + 1
        total += chunk.batch.num_rows
        del chunk
    rss_growth_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert total == next_offset == 1_000_000
    # one 20k chunk of these events is ~5 MB of Arrow data; 1M records would be ~250 MB
    assert peak_arrow < 64 << 20, peak_arrow
    assert rss_growth_mib < 150, rss_growth_mib


def test_a_large_fixed_cut_short_in_the_last_record_of_a_first_chunk(registry):
    """The padding after the packed values grows for a writer schema first seen in
    this chunk whose reads can run far past a corrupt row's end."""
    schema = {
        "type": "record",
        "name": "Blob",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "blob", "type": {"type": "fixed", "name": "B", "size": 4000}},
        ],
    }
    schema_id = registry.register("blobs-value", json.dumps(schema))
    good = io.BytesIO()
    fastavro.schemaless_writer(good, parse_schema(schema), {"id": 1, "blob": b"\x07" * 4000})
    records = [
        Record(0, BASE_MS, None, frame(schema_id, good.getvalue()), ()),
        Record(1, BASE_MS, None, frame(schema_id, good.getvalue()[:3]), ()),
    ]
    chunk = ConfluentAvroDecoder(registry, "blobs").decode(0, records)
    assert chunk.batch.column("blob").to_pylist() == [b"\x07" * 4000]
    assert [(q.offset, q.reason.split(":")[0]) for q in chunk.quarantined] == [
        (1, "undecodable body")
    ]


def test_json_values_decode_as_the_registered_schema(registry, ids):
    """Plain JSON objects read as the topic's latest schema (v3): same shape as the Avro
    decoder's, defaults for missing fields, every bad value quarantined with its bytes."""
    evs = events(40)
    records, expected = [], []
    for offset, event in enumerate(evs):
        document = dict(event)
        if offset % 2:
            del document["referrer"]  # missing: takes the schema's default (null)
            event = {**event, "referrer": None}
        key = f"user-{offset}".encode() if offset % 3 == 0 else None
        records.append(Record(offset, BASE_MS + offset, key, json.dumps(document).encode(), ()))
        expected.append(expected_row(event, offset, ids["PageViewEvent.v3"], key))
    no_member = {k: v for k, v in evs[0].items() if k != "member_id"}
    broken = {
        3: (None, "null value"),
        4: (b'{"header": "\xff\xfe"}', "not UTF-8"),
        5: (b"{not json", "not JSON"),
        6: (b"[1, 2]", "not a JSON object: a list"),
        7: (json.dumps(no_member).encode(), "does not match schema"),
        8: (json.dumps({**evs[0], "member_id": 1.5}).encode(), "does not match schema"),
        9: (json.dumps({**evs[0], "member_id": 2**63}).encode(), "does not match schema"),
        10: (("[" * 100_000).encode(), "not JSON"),
    }
    for offset, (value, _) in broken.items():
        records[offset] = records[offset]._replace(value=value)
    decoder = JsonDecoder(registry, TOPIC)
    chunk = decoder.decode(3, records)
    assert chunk.count == len(records)
    assert chunk.batch.schema == decoder.schema == ConfluentAvroDecoder(registry, TOPIC).schema
    got = {q.offset: q for q in chunk.quarantined}
    assert sorted(got) == sorted(broken)
    for offset, (value, reason) in broken.items():
        assert got[offset].reason.startswith(reason), (offset, got[offset].reason)
        assert got[offset].value == value and got[offset].schema_id is None
    assert plain_rows(chunk.batch) == [r for i, r in enumerate(expected) if i not in broken]


def test_raw_values_are_kept_as_they_are():
    values = [b"plain text", b"\x00\x00\x00\x00\x07not avro", None, b""]
    records = [Record(o, BASE_MS + o, b"k" if o else None, v, ()) for o, v in enumerate(values)]
    decoder = RawDecoder()
    chunk = decoder.decode(2, records)
    assert chunk.quarantined == []
    assert chunk.batch.schema.names == [
        "value",
        "_kafka_partition",
        "_kafka_offset",
        "_kafka_timestamp",
        "_kafka_key",
    ]
    assert chunk.batch.column("value").to_pylist() == values
    assert chunk.batch.column("_kafka_offset").to_pylist() == [0, 1, 2, 3]
    assert chunk.batch.column("_kafka_partition").to_pylist() == [2] * 4
    assert decoder.decode(2, []).batch.num_rows == 0
