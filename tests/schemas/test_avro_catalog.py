"""The product's .avsc files: present, valid, and shaped as the contracts say."""

import pytest

from schemas import canonical, catalog


def test_every_catalog_schema_is_valid():
    names = catalog.names()
    assert {"AuditEvent", "ClickEvent", "SearchEvent", "PageViewEvent.v1"} <= set(names)
    for name in names:
        canonical.parse(catalog.load_str(name))


def test_bare_name_resolves_to_the_latest_numbered_version():
    assert catalog.versions("PageViewEvent") == [
        "PageViewEvent.v1",
        "PageViewEvent.v2",
        "PageViewEvent.v3",
    ]
    assert catalog.load("PageViewEvent") == catalog.load("PageViewEvent.v3")
    assert catalog.versions("AuditEvent") == []


def test_unknown_name_is_a_key_error_listing_what_exists():
    with pytest.raises(KeyError, match="AuditEvent"):
        catalog.load("NoSuchEvent")


def test_activity_events_share_the_header():
    headers = []
    for name in ("PageViewEvent", "SearchEvent", "ClickEvent"):
        fields = {f["name"]: f for f in catalog.load(name)["fields"]}
        headers.append(fields["header"]["type"])
    assert headers[0] == headers[1] == headers[2]
    header_fields = {f["name"]: f["type"] for f in headers[0]["fields"]}
    assert header_fields["time"] == {"type": "long", "logicalType": "timestamp-millis"}
    assert header_fields["host"] == header_fields["service"] == "string"


def test_audit_event_has_the_design_fields():
    fields = {f["name"] for f in catalog.load("AuditEvent")["fields"]}
    assert {
        "tier",
        "host",
        "service",
        "topic",
        "window_start_ms",
        "window_ms",
        "count",
        "emitted_at_ms",
    } <= fields


def test_loads_return_fresh_copies():
    first = catalog.load("AuditEvent")
    first["fields"].clear()
    assert catalog.load("AuditEvent")["fields"]
