"""The Avro writer encodes Arrow columns straight to Avro (ingest/avro_encoder.py): on
generated schemas (records, arrays, maps, enums, fixed, decimals, unions with null,
logical types), data decoded by the load is written to container files that fastavro
reads back to the same values, and that Apache Avro's Java reader (the library Spark's
Avro source is built on, from Spark's own jars) reads record for record."""

from __future__ import annotations

import io
import json
import random

import fastavro
import pyarrow as pa
import pytest

from broker.records.vectorized import packed
from ingest.avro_encoder import compile_encoder
from ingest.decoders import columnar
from ingest.writers import AvroRecordWriter
from schemas.canonical import parse
from tests.ingest.test_decode_generated import Generator, encoded


def decoded(schema: dict, bodies: list[bytes]) -> pa.StructArray:
    """The bodies as the load decodes them (the columnar decoder)."""
    parsed = parse(json.dumps(schema))
    plan = columnar.compile_plan(parsed, parsed)
    data, starts, ends = packed(pa.array(bodies, pa.binary()), columnar.required_pad(plan))
    struct, bad = columnar.decode_rows(plan, data, starts, ends)
    assert not any(bad.to_pylist())
    return struct


def written(schema: dict, struct: pa.StructArray, codec: str, sync_interval: int) -> bytes:
    out = io.BytesIO()
    out.close = lambda: None  # the writer closes its file; keep the bytes readable
    writer = AvroRecordWriter(
        out, json.dumps(schema), metadata=(), codec=codec, sync_interval=sync_interval
    )
    batch = pa.RecordBatch.from_struct_array(struct)
    for start in range(0, len(batch), 70):  # several writes, several blocks
        writer.write(batch.slice(start, 70))
    result = writer.close()
    assert result.records == len(batch)
    return out.getvalue()


@pytest.mark.parametrize("seed", range(30))
def test_generated_schemas_written_from_arrow_read_back_by_fastavro(seed):
    gen = Generator(random.Random(2000 + seed))
    schema = gen.schema()
    values = [gen.value(schema) for _ in range(250)]
    bodies = encoded(schema, values)
    struct = decoded(schema, bodies)
    codec = ["null", "deflate", "snappy"][seed % 3]
    data = written(schema, struct, codec, sync_interval=[1, 2000, 1 << 20][seed % 3])
    reader = fastavro.reader(io.BytesIO(data))
    assert reader.codec == codec
    got = list(reader)
    # fastavro reads our file as it reads its own encoding of the values
    parsed = fastavro.parse_schema(schema)
    want = [fastavro.schemaless_reader(io.BytesIO(body), parsed) for body in bodies]
    assert got == want, json.dumps(schema)
    # Blocks hold what was pending at each sync interval, every record counted once.
    blocks = list(fastavro.block_reader(io.BytesIO(data)))
    assert sum(b.num_records for b in blocks) == len(values)


def test_bodies_are_fastavros_bytes_but_for_the_width_of_bytes_decimals():
    """Varints, lengths, unions, blocks: the encoder writes what fastavro writes."""
    for seed in range(30):
        gen = Generator(random.Random(2000 + seed))
        schema = gen.schema()
        if '"bytes", "logicalType": "decimal"' in json.dumps(schema):
            continue
        values = [gen.value(schema) for _ in range(100)]
        bodies = encoded(schema, values)
        ours = compile_encoder(parse(json.dumps(schema)))(decoded(schema, bodies))
        assert ours.to_pylist() == bodies, json.dumps(schema)


def test_written_files_are_read_by_the_java_avro_library(tmp_path, spark):
    jvm = spark.sparkContext._jvm
    for seed in range(8):
        gen = Generator(random.Random(3000 + seed))
        schema = gen.schema()
        values = [gen.value(schema) for _ in range(120)]
        bodies = encoded(schema, values)
        parsed = fastavro.parse_schema(schema)
        path = tmp_path / f"{seed}.avro"
        path.write_bytes(written(schema, decoded(schema, bodies), "deflate", 1 << 12))
        reader = jvm.org.apache.avro.file.DataFileReader(
            jvm.java.io.File(str(path)), jvm.org.apache.avro.generic.GenericDatumReader()
        )
        encoder_factory = jvm.org.apache.avro.io.EncoderFactory.get()
        writer = jvm.org.apache.avro.generic.GenericDatumWriter(reader.getSchema())
        count = 0
        while reader.hasNext():
            record = reader.next()
            # Java re-encodes what it read; fastavro must read that back as the value.
            out = jvm.java.io.ByteArrayOutputStream()
            binary = encoder_factory.binaryEncoder(out, None)
            writer.write(record, binary)
            binary.flush()
            again = fastavro.schemaless_reader(io.BytesIO(bytes(out.toByteArray())), parsed)
            want = fastavro.schemaless_reader(io.BytesIO(bodies[count]), parsed)
            assert again == want, json.dumps(schema)
            count += 1
        reader.close()
        assert count == len(values)
