"""Schema validation and identity."""

import json

import pytest

from schemas import canonical, catalog


def test_spellings_of_one_schema_share_an_identity():
    a = canonical.parse(
        json.dumps(
            {
                "type": "record",
                "name": "R",
                "namespace": "ns",
                "fields": [
                    {"name": "a", "type": {"type": "int"}},
                    {"name": "b", "type": {"type": "enum", "name": "E", "symbols": ["X"]}},
                    {"name": "c", "type": "E"},
                ],
            }
        )
    )
    b = canonical.parse(
        '{"fields": [{"type": "int", "name": "a"},'
        ' {"name": "b", "type": {"symbols": ["X"], "type": "enum", "name": "ns.E"}},'
        ' {"name": "c", "type": "ns.E"}], "name": "ns.R", "type": "record"}'
    )
    assert a.canonical == b.canonical
    assert set(a.named) == {"ns.R", "ns.E"}


def test_docs_and_defaults_are_part_of_the_identity():
    base = catalog.load("AuditEvent")
    changed = catalog.load("AuditEvent")
    changed["doc"] = "another doc"
    assert (
        canonical.parse(json.dumps(base)).canonical
        != canonical.parse(json.dumps(changed)).canonical
    )


def test_text_is_compact_json_of_what_was_sent():
    parsed = canonical.parse(catalog.load_str("ClickEvent"))
    assert json.loads(parsed.text) == catalog.load("ClickEvent")
    assert "\n" not in parsed.text


def test_recursive_records_are_valid():
    parsed = canonical.parse(
        '{"type":"record","name":"Node","fields":[{"name":"next","type":["null","Node"],"default":null}]}'
    )
    assert canonical.kind(parsed, parsed.tree["fields"][0]["type"][1]) == "record"


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "Empty schema"),
        ("{not json", "Invalid schema JSON"),
        ('"Unknown"', "unknown type"),
        ('{"type":"record","name":"R"}', "fields"),
        (
            '{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"a","type":"int"}]}',
            "duplicate field",
        ),
        ('["int","int"]', "duplicate"),
        ('["null",["int"]]', "unions may not"),
        (
            '{"type":"record","name":"R","fields":[{"name":"a","type":["null","int"],"default":1}]}',
            "invalid default",
        ),
        (
            '{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":"x"}]}',
            "invalid default",
        ),
        (
            '{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":3000000000}]}',
            "invalid default",
        ),
        ('{"type":"enum","name":"E","symbols":["A","A"]}', "duplicate enum"),
        ('{"type":"enum","name":"E","symbols":["A"],"default":"B"}', "enum default"),
        ('{"type":"fixed","name":"F"}', "size"),
        ('{"type":"array"}', "items"),
        ('{"type":"record","name":"1bad","fields":[]}', "invalid name"),
        ('{"type":"record","name":"R","fields":[{"name":"a","type":"int","order":"up"}]}', "order"),
        ("5", "a schema is"),
        (
            '{"type":"record","name":"R","fields":[{"name":"x","type":{"type":"enum","name":"R","symbols":["A"]}}]}',
            "already defined",
        ),
    ],
)
def test_invalid_schemas_are_refused_with_a_reason(text, reason):
    with pytest.raises(canonical.InvalidSchema, match=reason):
        canonical.parse(text)
