"""The columnar Avro decoder against fastavro on generated schemas and data: every
shape (records, arrays, maps, enums, fixed, decimals as bytes and fixed, unions with
null, logical types), nested at random, decoded both ways to the same Arrow array;
then the same bodies with random byte flips and cuts, where both ways must keep and
reject the same rows (the columnar decoder's suspects are re-read by fastavro)."""

from __future__ import annotations

import decimal
import io
import json
import random

import fastavro
import pyarrow as pa
import pytest

from broker.records.vectorized import packed
from ingest.decoders import columnar
from ingest.decoders.rowwise import BadRow, RowDecoder
from schemas.canonical import parse
from schemas.serde import parse_schema


class Generator:
    """Random Avro schemas and values that fit them (names unique per schema)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.names = 0

    def name(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def schema(self, depth: int = 0) -> dict:
        fields = [
            {"name": self.name("f"), "type": self.type(depth + 1)}
            for _ in range(self.rng.randrange(1, 6))
        ]
        return {"type": "record", "name": self.name("R"), "fields": fields}

    def type(self, depth: int):
        rng = self.rng
        simple = [
            "boolean",
            "int",
            "long",
            "float",
            "double",
            "string",
            "bytes",
            {"type": "int", "logicalType": "date"},
            {"type": "long", "logicalType": "timestamp-millis"},
            {"type": "enum", "name": self.name("E"), "symbols": ["A", "B", "C"]},
            # size 1 at least: fastavro loops for ever on a corrupt count of zero-byte items
            {"type": "fixed", "name": self.name("X"), "size": rng.randrange(1, 6)},
            {"type": "bytes", "logicalType": "decimal", "precision": 18, "scale": 3},
            {
                "type": "fixed",
                "name": self.name("D"),
                "size": 8,
                "logicalType": "decimal",
                "precision": 18,
                "scale": 2,
            },
            {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 0},
        ]
        if depth >= 3 or rng.random() < 0.5:
            chosen = rng.choice(simple)
        else:
            shape = rng.choice(["record", "array", "map", "union"])
            if shape == "record":
                chosen = self.schema(depth)
            elif shape == "array":
                chosen = {"type": "array", "items": self.type(depth + 1)}
            elif shape == "map":
                chosen = {"type": "map", "values": self.type(depth + 1)}
            else:
                inner = self.type(depth + 1)
                while isinstance(inner, list):  # unions may not hold unions
                    inner = self.type(depth + 1)
                return ["null", inner] if rng.random() < 0.5 else [inner, "null"]
        return chosen

    def value(self, t):
        rng = self.rng
        if isinstance(t, list):
            other = t[0] if t[1] == "null" else t[1]
            return None if rng.random() < 0.3 else self.value(other)
        if isinstance(t, str):
            t = {"type": t}
        kind, logical = t["type"], t.get("logicalType")
        if logical == "decimal":
            digits = t["precision"]
            unscaled = rng.randrange(-(10**digits) + 1, 10**digits)
            return decimal.Decimal(unscaled).scaleb(-t.get("scale", 0))
        if logical == "date":  # within Python's dates, for readers that convert
            return rng.randrange(-719_162, 2_932_896)
        if logical == "timestamp-millis":
            return rng.randrange(-(2**45), 2**45)
        if kind == "record":
            return {f["name"]: self.value(f["type"]) for f in t["fields"]}
        if kind == "array":
            return [self.value(t["items"]) for _ in range(rng.choice([0, 1, 2, 5, 40]))]
        if kind == "map":
            return {
                rng.choice(["k", "ключ", ""]) + str(i): self.value(t["values"])
                for i in range(rng.choice([0, 1, 3]))
            }
        if kind == "enum":
            return rng.choice(t["symbols"])
        if kind == "fixed":
            return bytes(rng.randrange(256) for _ in range(t["size"]))
        return {
            "boolean": lambda: rng.random() < 0.5,
            "int": lambda: rng.randrange(-(2**31), 2**31),
            "long": lambda: rng.randrange(-(2**63), 2**63),
            "float": lambda: rng.choice([0.0, -1.5, 3.25e5]),
            "double": lambda: rng.random() * 1e300,
            "string": lambda: rng.choice(["", "s", "ünï ✓" * rng.randrange(4)]),
            "bytes": lambda: bytes(rng.randrange(256) for _ in range(rng.randrange(5))),
        }[kind]()


def encoded(schema: dict, values: list) -> list[bytes]:
    parsed = parse_schema(schema)
    bodies = []
    for value in values:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, value)
        bodies.append(out.getvalue())
    return bodies


def both_ways(schema: dict, bodies: list[bytes]):
    """(columnar struct, bad mask) and fastavro's rows (None for a bad row)."""
    parsed = parse(json.dumps(schema))
    plan = columnar.compile_plan(parsed, parsed)
    data, starts, ends = packed(pa.array(bodies, pa.binary()), columnar.required_pad(plan))
    struct, bad = columnar.decode_rows(plan, data, starts, ends)
    rows = RowDecoder(parsed, parsed)
    reference = []
    for body in bodies:
        try:
            record = rows.read(body)
        except BadRow:
            record = None
        # fastavro reads an int of any width; Arrow (and the load) refuse it.
        if record is not None and rows.to_arrow_checked([record])[1]:
            record = None
        reference.append(record)
    return struct, bad, rows, reference


@pytest.mark.parametrize("seed", range(40))
def test_generated_schemas_decode_as_fastavro_does(seed):
    gen = Generator(random.Random(seed))
    schema = gen.schema()
    values = [gen.value(schema) for _ in range(200)]
    struct, bad, rows, reference = both_ways(schema, encoded(schema, values))
    assert not bad.to_pylist().count(True)
    assert struct.equals(rows.to_arrow(reference)), json.dumps(schema)


@pytest.mark.parametrize("seed", range(40))
def test_generated_corrupt_bodies_are_rejected_or_read_as_fastavro_does(seed):
    """A row the columnar decoder accepts must be exactly what fastavro reads (it may
    be suspicious of more rows than fastavro rejects: those are re-read by fastavro)."""
    gen = Generator(random.Random(1000 + seed))
    schema = gen.schema()
    bodies = encoded(schema, [gen.value(schema) for _ in range(300)])
    rng = random.Random(seed)
    for i in range(len(bodies)):
        body = bytearray(bodies[i])
        if not body or rng.random() < 0.3:
            continue
        if rng.random() < 0.5:
            for _ in range(rng.randrange(1, 3)):
                body[rng.randrange(len(body))] = rng.randrange(256)
        else:
            del body[rng.randrange(len(body)) :]
        bodies[i] = bytes(body)
    struct, bad, rows, reference = both_ways(schema, bodies)
    accepted = [i for i, b in enumerate(bad.to_pylist()) if not b]
    got = struct.filter(pa.array([not b for b in bad.to_pylist()]))
    assert all(reference[i] is not None for i in accepted), json.dumps(schema)
    assert got.equals(rows.to_arrow([reference[i] for i in accepted])), json.dumps(schema)
