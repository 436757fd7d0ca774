"""The decode stage alone: Confluent-framed Avro values -> Arrow record batches of
the topic's target schema (with the _kafka_* columns), in records per second per
core, for each way of doing it, in the same run on the same records.

    .venv/bin/python -m bench.bench_decode [--records 100000] [--rounds 5] [--chunk 50000]

Options measured (all produce the same batch; the benchmark checks that):

  rows-user     fastavro.schemaless_reader per record (logical types on, as a
                user writes it) + pa.RecordBatch.from_pylist: the baseline (i)
  rows-ours     the load's own row path: ConfluentAvroDecoder with
                columnar_decoding=False (what it uses for schemas the columnar
                decoder does not read): fastavro per record with logical types
                off, one pa.array(struct) per chunk, casts per column
  block-fastavro the bodies of one writer schema wrapped as ONE Avro container
                block in memory and read by fastavro's Cython reader with the
                target as reader schema (ii). Not usable as is: a truncated or
                padded body shifts every later record of the block, so bad
                records cannot be told from good ones
  block-polars  the same block read by polars.read_avro (Rust, straight to
                Arrow; no schema resolution, so only for same-schema data); only
                when polars is importable (it is not a dependency)
  columnar      ours: ConfluentAvroDecoder, Arrow-compute decoding of all rows at
                once per field (ingest/decoders/columnar.py), every row checked;
                given each chunk as columns (RecordColumns), as the load gives it

Data: PageViewEvent records (header record + 4 fields, ~150 bytes framed), two
cases: all written with v3 = the target, and half v1 / half v3 (v1 rows are
projected: referrer gets its default, member_id is widened int -> long). A third
case, OrderEvent (below), has what PageViewEvent lacks: an array of records, an
array of strings, a map, an enum, decimals as bytes and as fixed (~200 bytes
framed, 0-5 line items).

"Per core": Arrow is limited to one CPU thread and the rate is records per CPU
second of this process (time.process_time), so other load on the machine
does not count; wall-clock rates are printed too. Rounds alternate between the
options so a busy machine slows all alike; the best round of each is reported.
"""

from __future__ import annotations

import argparse
import decimal
import io
import json
import os
import random
import time
import uuid

import fastavro
import pyarrow as pa

from bench.bench_serde import serve_registry
from bench.common import BASE_MS, events
from broker.records.batch import Record
from broker.records.columnar import RecordColumns
from ingest.decoders import ConfluentAvroDecoder, chunks
from ingest.decoders.rowwise import without_logical_types
from schemas import catalog
from schemas.client import RegistryClient
from schemas.serde import frame, parse_schema, unframe

TOPIC = "page-views"
ORDERS = "orders"
_MONEY = {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}
ORDER_SCHEMA = {
    "type": "record",
    "name": "OrderEvent",
    "namespace": "bench",
    "fields": [
        {"name": "time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "member_id", "type": "long"},
        {
            "name": "status",
            "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]},
        },
        {
            "name": "lines",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Line",
                    "fields": [
                        {"name": "sku", "type": "string"},
                        {"name": "quantity", "type": "int"},
                        {"name": "unit_price", "type": _MONEY},
                    ],
                },
            },
        },
        {
            "name": "total",
            "type": {
                "type": "fixed",
                "name": "Total",
                "size": 8,
                "logicalType": "decimal",
                "precision": 18,
                "scale": 2,
            },
        },
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attributes", "type": {"type": "map", "values": "string"}},
        {"name": "coupon", "type": ["null", "string"], "default": None},
    ],
}


def order_records(schema_id: int, count: int) -> list[Record]:
    rng = random.Random(11)
    writer = parse_schema(ORDER_SCHEMA)
    out = []
    for offset in range(count):
        lines = [
            {
                "sku": f"sku-{rng.randrange(10**6):06d}",
                "quantity": rng.randrange(1, 5),
                "unit_price": decimal.Decimal(rng.randrange(1, 10**6)).scaleb(-2),
            }
            for _ in range(rng.randrange(6))
        ]
        order = {
            "time": BASE_MS + offset * 37,
            "member_id": rng.randrange(2**31),
            "status": rng.choice(["NEW", "PAID", "SHIPPED"]),
            "lines": lines,
            "total": sum((x["unit_price"] * x["quantity"] for x in lines), decimal.Decimal("0.00")),
            "tags": rng.sample(["gift", "prime", "bulk", "eu"], rng.randrange(3)),
            "attributes": {"channel": rng.choice(["web", "app"])} if rng.random() < 0.7 else {},
            "coupon": None if rng.random() < 0.8 else "SPRING",
        }
        body = io.BytesIO()
        fastavro.schemaless_writer(body, writer, order)
        out.append(Record(offset, BASE_MS + offset, None, frame(schema_id, body.getvalue()), ()))
    return out


def make_records(ids: dict[str, int], count: int, mixed: bool) -> list[Record]:
    schemas = {name: parse_schema(catalog.load_str(name)) for name in ids}
    out = []
    for offset, event in enumerate(events(count)):
        name = "PageViewEvent.v1" if mixed and offset % 2 else "PageViewEvent.v3"
        if name == "PageViewEvent.v1":
            event = {k: v for k, v in event.items() if k != "referrer"}
        body = io.BytesIO()
        fastavro.schemaless_writer(body, schemas[name], event)
        key = f"member-{offset % 1000}".encode() if offset % 4 == 0 else None
        out.append(Record(offset, BASE_MS + offset, key, frame(ids[name], body.getvalue()), ()))
    return out


# -- the options -------------------------------------------------------------


class RowsUser:
    """The baseline: what a user writes with fastavro and pyarrow."""

    def __init__(self, registry: RegistryClient, schema: pa.Schema, topic: str = TOPIC) -> None:
        self.registry = registry
        self.schema = schema
        self.target_id = registry.latest(f"{topic}-value").id
        self.reader = parse_schema(registry.schema(self.target_id))
        self.writers: dict[int, object] = {}

    def __call__(self, records: list[Record]) -> pa.RecordBatch:
        rows = []
        for r in records:
            schema_id, body = unframe(r.value)
            writer = self.writers.get(schema_id)
            if writer is None:
                writer = self.writers[schema_id] = parse_schema(self.registry.schema(schema_id))
            reader = None if schema_id == self.target_id else self.reader
            row = fastavro.schemaless_reader(io.BytesIO(body), writer, reader)
            header = row.get("header")  # Arrow takes no uuid.UUID: the user converts it
            if header is not None and isinstance(header["event_id"], uuid.UUID):
                header["event_id"] = str(header["event_id"])
            row["_kafka_partition"] = 0
            row["_kafka_offset"] = r.offset
            row["_kafka_timestamp"] = r.timestamp
            row["_kafka_key"] = r.key
            row["_schema_id"] = schema_id
            rows.append(row)
        return pa.RecordBatch.from_pylist(rows, schema=self.schema)


class Block:
    """One in-memory Avro container block per writer schema id (option ii)."""

    def __init__(self, registry: RegistryClient, reader_text: str, use_polars: bool) -> None:
        self.registry = registry
        self.reader = parse_schema(without_logical_types(json.loads(reader_text)))
        self.use_polars = use_polars
        self.sync = os.urandom(16)
        self.headers: dict[int, bytes] = {}

    def header(self, schema_id: int) -> bytes:
        found = self.headers.get(schema_id)
        if found is None:
            text = self.registry.schema(schema_id)
            if not self.use_polars:  # fastavro: plain types, converted by Arrow casts
                text = json.dumps(without_logical_types(json.loads(text)))
            out = io.BytesIO()
            out.write(b"Obj\x01")
            meta = {"avro.schema": text.encode(), "avro.codec": b"null"}
            fastavro.schemaless_writer(out, {"type": "map", "values": "bytes"}, meta)
            out.write(self.sync)
            found = self.headers[schema_id] = out.getvalue()
        return found

    def __call__(self, records: list[Record]) -> list:
        groups: dict[int, list[memoryview]] = {}
        for r in records:
            schema_id, body = unframe(r.value)
            groups.setdefault(schema_id, []).append(body)
        out = []
        for schema_id, bodies in groups.items():
            data = b"".join(bodies)
            block = io.BytesIO()
            block.write(self.header(schema_id))
            fastavro.schemaless_writer(block, "long", len(bodies))
            fastavro.schemaless_writer(block, "long", len(data))
            block.write(data)
            block.write(self.sync)
            block.seek(0)
            if self.use_polars:
                import polars

                out.append(polars.read_avro(block).to_arrow())
            else:
                rows = list(fastavro.reader(block, reader_schema=self.reader))
                out.append(pa.array(rows))
        return out


def columnar_option(decoder: ConfluentAvroDecoder, records: list[Record], chunk: int):
    """The columnar decoder fed as the load feeds it: each chunk's records as columns
    (RecordColumns, what broker/records/columnar.py makes of a fetch), built before
    timing. Fed ``Record`` objects it would first turn them into columns in Python,
    a cost the load does not have (its fetches are parsed column-wise)."""
    columns = {part[0].offset: RecordColumns.from_records(part) for part in chunks(records, chunk)}
    return lambda part: decoder.decode(0, columns[part[0].offset])


def check_same(decoder: ConfluentAvroDecoder, baseline: RowsUser, records: list[Record]) -> None:
    ours = decoder.decode(0, records).batch
    theirs = baseline(records)
    if not ours.equals(theirs):
        raise AssertionError("the columnar decoder and the baseline disagree")
    if any(w.plan is None for w in decoder._writers.values()):
        raise AssertionError("a writer schema is not read by the columnar decoder")
    rows = ConfluentAvroDecoder(decoder.registry, decoder.topic, columnar_decoding=False)
    if not rows.decode(0, records).batch.equals(ours):
        raise AssertionError("the row decoder and the columnar decoder disagree")


def measure(options: dict, records: list[Record], chunk: int, rounds: int) -> dict:
    best = {name: (float("inf"), float("inf")) for name in options}
    for _ in range(rounds):
        for name, work in options.items():
            wall, cpu = time.perf_counter(), time.process_time()
            for part in chunks(records, chunk):
                work(part)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            best[name] = (min(best[name][0], cpu), min(best[name][1], wall))
    return {name: (len(records) / cpu, len(records) / wall) for name, (cpu, wall) in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=50_000)
    args = parser.parse_args()
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    try:
        import polars  # noqa: F401

        have_polars = True
    except ImportError:
        have_polars = False

    server, thread, url = serve_registry()
    try:
        with RegistryClient(url) as registry:
            subject = f"{TOPIC}-value"
            ids = {
                name: registry.register(subject, catalog.load_str(name))
                for name in ("PageViewEvent.v1", "PageViewEvent.v2", "PageViewEvent.v3")
            }
            target = registry.latest(subject).schema
            for mixed in (False, True):
                records = make_records(ids, args.records, mixed)
                size = sum(len(r.value) for r in records) / len(records)
                decoder = ConfluentAvroDecoder(registry, TOPIC, chunk_size=args.chunk)
                baseline = RowsUser(registry, decoder.schema)
                check_same(decoder, baseline, records[: args.chunk])
                row_decoder = ConfluentAvroDecoder(registry, TOPIC, columnar_decoding=False)
                options = {
                    "rows-user": baseline,
                    "rows-ours": lambda part, d=row_decoder: d.decode(0, part),
                    "block-fastavro": Block(registry, target, use_polars=False),
                    "columnar": columnar_option(decoder, records, args.chunk),
                }
                if have_polars and not mixed:
                    options["block-polars"] = Block(registry, target, use_polars=True)
                rates = measure(options, records, args.chunk, args.rounds)
                case = "v1/v3 mixed, projected to v3" if mixed else "all v3 (= target)"
                print(f"\n{case}: {len(records):,} records, {size:.0f} bytes framed on average")
                base = rates["rows-user"][0]
                print(
                    f"{'option':16} {'rec/s per CPU':>14} {'rec/s wall':>12} {'vs rows-user':>13}"
                )
                for name, (cpu, wall) in rates.items():
                    print(f"{name:16} {cpu:14,.0f} {wall:12,.0f} {cpu / base:12.2f}x")
            order_id = registry.register(f"{ORDERS}-value", json.dumps(ORDER_SCHEMA))
            records = order_records(order_id, args.records)
            decoder = ConfluentAvroDecoder(registry, ORDERS, chunk_size=args.chunk)
            baseline = RowsUser(registry, decoder.schema, ORDERS)
            check_same(decoder, baseline, records[: args.chunk])
            row_decoder = ConfluentAvroDecoder(registry, ORDERS, columnar_decoding=False)
            options = {
                "rows-user": baseline,
                "rows-ours": lambda part, d=row_decoder: d.decode(0, part),
                "columnar": columnar_option(decoder, records, args.chunk),
            }
            rates = measure(options, records, args.chunk, args.rounds)
            size = sum(len(r.value) for r in records) / len(records)
            print(
                f"\nOrderEvent (arrays, a map, an enum, decimals): {len(records):,} records, "
                f"{size:.0f} bytes framed on average"
            )
            base = rates["rows-user"][0]
            print(f"{'option':16} {'rec/s per CPU':>14} {'rec/s wall':>12} {'vs rows-user':>13}")
            for name, (cpu, wall) in rates.items():
                print(f"{name:16} {cpu:14,.0f} {wall:12,.0f} {cpu / base:12.2f}x")
    finally:
        server.should_exit = True
        thread.join(10)


if __name__ == "__main__":
    main()
