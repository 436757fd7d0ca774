"""Compatibility: the Avro resolution rules, and the registry levels over the
PageViewEvent evolutions, through the checker and through the REST API."""

import json

import httpx
import pytest

from schemas import canonical, catalog
from schemas.compatibility import Level, can_read, problems, read_problems

V1, V2, V3 = (canonical.parse(catalog.load_str(f"PageViewEvent.v{n}")) for n in (1, 2, 3))
DROP_DEFAULT = canonical.parse(catalog.load_str("PageViewEvent.drop-default"))
REQUIRED_FIELD = canonical.parse(catalog.load_str("PageViewEvent.required-field"))
NAMES = {
    "v1": "PageViewEvent.v1",
    "v2": "PageViewEvent.v2",
    "v3": "PageViewEvent.v3",
    "drop-default": "PageViewEvent.drop-default",
    "required-field": "PageViewEvent.required-field",
}

L = Level
ALL_LEVELS = list(Level)

# (history, candidate, levels that allow it). Every level not listed refuses it.
MATRIX = [
    # An optional field with a default: readable both ways.
    (["v1"], "v2", set(ALL_LEVELS)),
    # int -> long: new readers read old int data; old readers cannot read longs.
    (["v1", "v2"], "v3", {L.NONE, L.BACKWARD, L.BACKWARD_TRANSITIVE}),
    # Dropping referrer's default: fine against v3 (which has referrer), not v1.
    (["v1", "v2", "v3"], "drop-default", {L.NONE, L.BACKWARD, L.FORWARD, L.FULL}),
    # A required field without default: new readers cannot read any old data;
    # v3 readers skip it, v1 readers also trip over long -> int.
    (["v1", "v2", "v3"], "required-field", {L.NONE, L.FORWARD}),
    # Going back from long to int is refused backward (long data unreadable as int).
    (["v3"], "v2", {L.NONE, L.FORWARD, L.FORWARD_TRANSITIVE}),
]

CASES = [
    pytest.param(
        history,
        candidate,
        level,
        level in allowed,
        id=f"{'+'.join(history)}->{candidate}-{level.value}",
    )
    for history, candidate, allowed in MATRIX
    for level in ALL_LEVELS
]


def parsed(name: str) -> canonical.ParsedSchema:
    return canonical.parse(catalog.load_str(NAMES[name]))


@pytest.mark.parametrize("history, candidate, level, allowed", CASES)
def test_matrix_through_the_checker(history, candidate, level, allowed):
    found = problems(level, parsed(candidate), [parsed(h) for h in history])
    assert (not found) == allowed, found


@pytest.mark.parametrize("history, candidate, level, allowed", CASES)
def test_matrix_through_the_rest_api(running_registry, history, candidate, level, allowed):
    with httpx.Client(base_url=running_registry.url) as http:
        subject = "page-views-value"
        http.put(f"/config/{subject}", json={"compatibility": "NONE"}).raise_for_status()
        for name in history:
            http.post(
                f"/subjects/{subject}/versions", json={"schema": catalog.load_str(NAMES[name])}
            ).raise_for_status()
        http.put(f"/config/{subject}", json={"compatibility": level.value}).raise_for_status()
        body = {"schema": catalog.load_str(NAMES[candidate])}

        check = http.post(f"/compatibility/subjects/{subject}/versions?verbose=true", json=body)
        assert check.status_code == 200
        assert check.json()["is_compatible"] == allowed, check.json()
        assert bool(check.json()["messages"]) != allowed

        answer = http.post(f"/subjects/{subject}/versions", json=body)
        if allowed:
            assert answer.status_code == 200, answer.text
            assert isinstance(answer.json()["id"], int)
        else:
            assert answer.status_code == 409
            assert answer.json()["error_code"] == 409
            versions = http.get(f"/subjects/{subject}/versions").json()
            assert len(versions) == len(history)


def test_check_against_one_version_ignores_the_others(running_registry):
    with httpx.Client(base_url=running_registry.url) as http:
        subject = "pv-value"
        http.put(f"/config/{subject}", json={"compatibility": "NONE"})
        for name in ("v1", "v2", "v3"):
            http.post(
                f"/subjects/{subject}/versions", json={"schema": catalog.load_str(NAMES[name])}
            )
        http.put(f"/config/{subject}", json={"compatibility": "BACKWARD_TRANSITIVE"})
        body = {"schema": catalog.load_str(NAMES["drop-default"])}
        latest = http.post(f"/compatibility/subjects/{subject}/versions/latest", json=body)
        first = http.post(f"/compatibility/subjects/{subject}/versions/1?verbose=true", json=body)
        assert latest.json() == {"is_compatible": True}
        assert first.json()["is_compatible"] is False
        assert "referrer" in first.json()["messages"][0]


# -- the resolution rules one by one -------------------------------------------


def schema(node) -> canonical.ParsedSchema:
    return canonical.parse(json.dumps(node))


def record(*fields, name="R", **extra):
    return {"type": "record", "name": name, "fields": list(fields), **extra}


PROMOTABLE = [
    ("int", "long"),
    ("int", "float"),
    ("int", "double"),
    ("long", "float"),
    ("long", "double"),
    ("float", "double"),
    ("string", "bytes"),
    ("bytes", "string"),
]


@pytest.mark.parametrize("writer, reader", PROMOTABLE)
def test_promotions_go_one_way(writer, reader):
    assert can_read(schema(reader), schema(writer))
    if (reader, writer) not in PROMOTABLE:
        assert not can_read(schema(writer), schema(reader))


@pytest.mark.parametrize(
    "a, b", [("int", "string"), ("boolean", "int"), ("null", "string"), ("double", "float")]
)
def test_unrelated_primitives_do_not_resolve(a, b):
    assert read_problems(schema(b), schema(a))[0].startswith("TYPE_MISMATCH")


def test_records_match_by_full_name_or_alias():
    writer = schema(record({"name": "a", "type": "int"}, name="old.R"))
    assert not can_read(schema(record({"name": "a", "type": "int"}, name="new.R")), writer)
    aliased = record({"name": "a", "type": "int"}, name="new.R", aliases=["old.R"])
    assert can_read(schema(aliased), writer)


def test_fields_match_by_name_or_reader_alias_and_need_defaults():
    writer = schema(record({"name": "a", "type": "int"}, {"name": "gone", "type": "string"}))
    renamed = schema(record({"name": "b", "type": "int", "aliases": ["a"]}))
    assert can_read(renamed, writer)  # writer's extra field is skipped
    missing = schema(record({"name": "a", "type": "int"}, {"name": "c", "type": "int"}))
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in read_problems(missing, writer)[0]
    defaulted = schema(
        record({"name": "a", "type": "int"}, {"name": "c", "type": "int", "default": 0})
    )
    assert can_read(defaulted, writer)


def test_enum_symbols_missing_from_the_reader_need_a_reader_default():
    writer = schema({"type": "enum", "name": "E", "symbols": ["A", "B", "C"]})
    assert (
        "MISSING_ENUM_SYMBOLS"
        in read_problems(schema({"type": "enum", "name": "E", "symbols": ["A", "B"]}), writer)[0]
    )
    assert can_read(
        schema({"type": "enum", "name": "E", "symbols": ["A", "B"], "default": "A"}), writer
    )
    assert can_read(schema({"type": "enum", "name": "E", "symbols": ["A", "B", "C", "D"]}), writer)
    assert not can_read(schema({"type": "enum", "name": "F", "symbols": ["A", "B", "C"]}), writer)


def test_fixed_match_by_name_and_size():
    writer = schema({"type": "fixed", "name": "F", "size": 4})
    assert can_read(schema({"type": "fixed", "name": "F", "size": 4}), writer)
    assert (
        "FIXED_SIZE_MISMATCH"
        in read_problems(schema({"type": "fixed", "name": "F", "size": 8}), writer)[0]
    )
    assert (
        "NAME_MISMATCH"
        in read_problems(schema({"type": "fixed", "name": "G", "size": 4}), writer)[0]
    )


def test_unions():
    assert can_read(schema(["null", "long"]), schema("int"))  # reader branch promotes
    assert not can_read(schema(["null", "string"]), schema("int"))
    assert can_read(schema(["null", "int", "string"]), schema(["int", "null"]))
    # Every writer branch must be readable.
    assert not can_read(schema("int"), schema(["null", "int"]))
    assert can_read(schema("long"), schema(["int", "long"]))


def test_arrays_and_maps_recurse():
    assert can_read(
        schema({"type": "array", "items": "long"}), schema({"type": "array", "items": "int"})
    )
    assert not can_read(
        schema({"type": "array", "items": "int"}), schema({"type": "array", "items": "long"})
    )
    assert can_read(
        schema({"type": "map", "values": "double"}), schema({"type": "map", "values": "float"})
    )
    assert not can_read(
        schema({"type": "map", "values": "int"}), schema({"type": "array", "items": "int"})
    )


def test_recursive_types_terminate():
    node = record(
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "R"], "default": None}
    )
    wider = record(
        {"name": "v", "type": "long"}, {"name": "next", "type": ["null", "R"], "default": None}
    )
    assert can_read(schema(wider), schema(node))
    assert not can_read(schema(node), schema(wider))


def test_logical_types_resolve_by_their_underlying_type():
    millis = schema({"type": "long", "logicalType": "timestamp-millis"})
    assert can_read(millis, schema("long"))
    assert can_read(schema("double"), millis)


def test_level_parsing():
    assert Level.parse("full_transitive") is Level.FULL_TRANSITIVE
    with pytest.raises(ValueError):
        Level.parse("SIDEWAYS")
