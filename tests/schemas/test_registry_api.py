"""The REST API served by our registry, checked over real HTTP."""

import json

import httpx
import pytest

from schemas import catalog

V1 = catalog.load_str("PageViewEvent.v1")
V2 = catalog.load_str("PageViewEvent.v2")
V3 = catalog.load_str("PageViewEvent.v3")
AUDIT = catalog.load_str("AuditEvent")
MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"


@pytest.fixture
def http(running_registry):
    with httpx.Client(
        base_url=running_registry.url, headers={"Content-Type": MEDIA_TYPE}
    ) as client:
        yield client


def register(http, subject, schema):
    answer = http.post(f"/subjects/{subject}/versions", json={"schema": schema})
    assert answer.status_code == 200, answer.text
    return answer.json()["id"]


def error(answer):
    return answer.status_code, answer.json()["error_code"]


def test_register_is_idempotent_and_ids_are_global(http):
    first = register(http, "pv-value", V1)
    assert register(http, "pv-value", V1) == first
    # The same schema, spelled differently (whitespace, key order), is the same schema.
    respelled = json.dumps(json.loads(V1), sort_keys=True, indent=4)
    assert register(http, "pv-value", respelled) == first
    assert http.get("/subjects/pv-value/versions").json() == [1]
    # Under another subject: a new version 1 there, but the same global id.
    assert register(http, "pv-copy-value", V1) == first
    second = register(http, "pv-value", V2)
    assert second != first
    assert http.get("/subjects").json() == ["pv-copy-value", "pv-value"]


def test_register_response_headers_and_accepted_content_types(http):
    answer = http.post(
        "/subjects/a-value/versions",
        content=json.dumps({"schema": AUDIT}),
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith(MEDIA_TYPE)


def test_versions_and_schemas_by_id(http):
    id1 = register(http, "pv-value", V1)
    id2 = register(http, "pv-value", V2)
    assert http.get("/subjects/pv-value/versions").json() == [1, 2]
    latest = http.get("/subjects/pv-value/versions/latest").json()
    assert latest == {"subject": "pv-value", "version": 2, "id": id2, "schema": latest["schema"]}
    assert json.loads(latest["schema"]) == json.loads(V2)
    assert http.get("/subjects/pv-value/versions/-1").json()["version"] == 2
    assert http.get("/subjects/pv-value/versions/1").json()["id"] == id1
    raw = http.get("/subjects/pv-value/versions/1/schema")
    assert json.loads(raw.text) == json.loads(V1)
    assert json.loads(http.get(f"/schemas/ids/{id1}").json()["schema"]) == json.loads(V1)
    assert json.loads(http.get(f"/schemas/ids/{id2}/schema").text) == json.loads(V2)
    register(http, "other-value", V1)
    assert http.get(f"/schemas/ids/{id1}/versions").json() == [
        {"subject": "other-value", "version": 1},
        {"subject": "pv-value", "version": 1},
    ]
    assert http.get(f"/schemas/ids/{id1}/subjects").json() == ["other-value", "pv-value"]
    assert http.get("/schemas/types").json() == ["AVRO"]


def test_lookup_under_a_subject(http):
    schema_id = register(http, "pv-value", V1)
    found = http.post("/subjects/pv-value", json={"schema": V1}).json()
    assert (found["subject"], found["version"], found["id"]) == ("pv-value", 1, schema_id)
    assert error(http.post("/subjects/pv-value", json={"schema": V2})) == (404, 40403)
    assert error(http.post("/subjects/nope", json={"schema": V1})) == (404, 40401)


def test_not_found_errors(http):
    register(http, "pv-value", V1)
    assert error(http.get("/subjects/nope/versions")) == (404, 40401)
    assert error(http.get("/subjects/nope/versions/1")) == (404, 40401)
    assert error(http.get("/subjects/pv-value/versions/7")) == (404, 40402)
    assert error(http.get("/schemas/ids/999")) == (404, 40403)
    assert error(http.get("/schemas/ids/999/versions")) == (404, 40403)
    assert error(http.get("/no/such/route")) == (404, 404)


@pytest.mark.parametrize("version", ["0", "abc", "-2", str(2**31)])
def test_invalid_versions(http, version):
    register(http, "pv-value", V1)
    answer = http.get(f"/subjects/pv-value/versions/{version}")
    assert error(answer) == (422, 42202)
    assert version in answer.json()["message"]


@pytest.mark.parametrize(
    "body, status, code",
    [
        (b"{not json", 400, 400),
        (b"[1, 2]", 400, 400),
        (b'{"schema": {"type": "string"}}', 400, 400),  # schema must be a JSON string
        (b'{"schema": "string", "schemaType": 5}', 400, 400),
        (b"", 422, 422),
        (b"{}", 422, 42201),  # no schema at all
        (b'{"schema": ""}', 422, 42201),
        (b'{"schema": "{\\"type\\": \\"record\\""}', 422, 42201),  # not JSON inside
        (b'{"schema": "\\"NoSuchType\\""}', 422, 42201),
        (b'{"schema": "{\\"type\\":\\"record\\",\\"name\\":\\"R\\"}"}', 422, 42201),
        (b'{"schema": "{\\"type\\": \\"string\\"}", "schemaType": "PROTOBUF"}', 422, 42201),
    ],
)
def test_bad_register_bodies_get_confluent_errors_and_the_service_keeps_serving(
    http, body, status, code
):
    answer = http.post("/subjects/bad-value/versions", content=body)
    assert error(answer) == (status, code), answer.text
    assert isinstance(answer.json()["message"], str)
    # Nothing was registered and the service still works.
    assert error(http.get("/subjects/bad-value/versions")) == (404, 40401)
    assert register(http, "good-value", AUDIT) >= 1


def test_unknown_request_fields_are_ignored(http):
    answer = http.post(
        "/subjects/a-value/versions",
        json={
            "schema": AUDIT,
            "schemaType": "AVRO",
            "references": [],
            "metadata": None,
            "ruleSet": None,
        },
    )
    assert answer.status_code == 200


def test_incompatible_schema_is_409_and_leaves_the_subject_as_it_was(http):
    register(http, "pv-value", V3)
    answer = http.post(
        "/subjects/pv-value/versions",
        json={"schema": catalog.load_str("PageViewEvent.required-field")},
    )
    assert error(answer) == (409, 409)
    assert "session_id" in answer.json()["message"]
    assert http.get("/subjects/pv-value/versions").json() == [1]


def test_reregistering_a_registered_schema_skips_the_compatibility_check(http):
    # As in Confluent: a schema already under the subject returns its id, even if
    # the level would refuse it as a new version.
    first = register(http, "pv-value", V1)
    register(http, "pv-value", V3)
    assert register(http, "pv-value", V1) == first


def test_config_global_and_per_subject(http):
    assert http.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
    assert http.put("/config", json={"compatibility": "full"}).json() == {"compatibility": "FULL"}
    assert http.get("/config").json() == {"compatibilityLevel": "FULL"}
    assert error(http.get("/config/pv-value")) == (404, 40408)
    assert http.get("/config/pv-value?defaultToGlobal=true").json() == {
        "compatibilityLevel": "FULL"
    }
    assert http.put("/config/pv-value", json={"compatibility": "NONE"}).json() == {
        "compatibility": "NONE"
    }
    assert http.get("/config/pv-value").json() == {"compatibilityLevel": "NONE"}
    # The subject's NONE lets an otherwise incompatible chain through.
    register(http, "pv-value", V3)
    register(http, "pv-value", V1)
    assert http.delete("/config/pv-value").json() == {"compatibilityLevel": "NONE"}
    assert error(http.get("/config/pv-value")) == (404, 40408)
    assert http.delete("/config").json() == {"compatibilityLevel": "FULL"}
    assert http.get("/config").json() == {"compatibilityLevel": "BACKWARD"}


@pytest.mark.parametrize(
    "body, status, code",
    [
        ({"compatibility": "SIDEWAYS"}, 422, 42203),
        ({"compatibility": 3}, 422, 42203),
        ({}, 422, 422),
    ],
)
def test_bad_config_bodies(http, body, status, code):
    assert error(http.put("/config", json=body)) == (status, code)
    assert error(http.put("/config/x", json=body)) == (status, code)
    assert http.get("/config").json() == {"compatibilityLevel": "BACKWARD"}


def test_compatibility_endpoint_errors(http):
    body = {"schema": V2}
    assert error(http.post("/compatibility/subjects/nope/versions/latest", json=body)) == (
        404,
        40401,
    )
    register(http, "pv-value", V1)
    assert error(http.post("/compatibility/subjects/pv-value/versions/5", json=body)) == (
        404,
        40402,
    )
    assert error(http.post("/compatibility/subjects/pv-value/versions/zero", json=body)) == (
        422,
        42202,
    )
    assert error(
        http.post("/compatibility/subjects/pv-value/versions/1", json={"schema": "{"})
    ) == (422, 42201)
    # No versions yet: anything is compatible with nothing.
    assert http.post("/compatibility/subjects/nope/versions", json=body).json() == {
        "is_compatible": True
    }


def test_soft_then_permanent_subject_delete(http):
    id1 = register(http, "pv-value", V1)
    register(http, "pv-value", V2)
    assert error(http.delete("/subjects/pv-value?permanent=true")) == (404, 40405)
    assert http.delete("/subjects/pv-value").json() == [1, 2]
    assert error(http.delete("/subjects/pv-value")) == (404, 40404)
    assert "pv-value" not in http.get("/subjects").json()
    assert http.get("/subjects?deleted=true").json() == ["pv-value"]
    assert error(http.get("/subjects/pv-value/versions")) == (404, 40401)
    assert http.get("/subjects/pv-value/versions?deleted=true").json() == [1, 2]
    assert http.get("/subjects/pv-value/versions/1?deleted=true").json()["id"] == id1
    # Soft-deleted schemas stay readable by id: consumers still hold such data.
    assert http.get(f"/schemas/ids/{id1}").status_code == 200
    assert error(http.post("/subjects/pv-value", json={"schema": V1})) == (404, 40401)
    assert http.post("/subjects/pv-value?deleted=true", json={"schema": V1}).json()["version"] == 1

    assert http.delete("/subjects/pv-value?permanent=true").json() == [1, 2]
    assert error(http.delete("/subjects/pv-value?permanent=true")) == (404, 40401)
    assert http.get("/subjects?deleted=true").json() == []
    assert error(http.get(f"/schemas/ids/{id1}")) == (404, 40403)
    # Ids are never reused; versions of a re-created subject start again at 1.
    again = register(http, "pv-value", AUDIT)
    assert again > id1
    assert http.get("/subjects/pv-value/versions").json() == [1]


def test_registering_after_a_soft_delete_continues_the_versions(http):
    id1 = register(http, "pv-value", V1)
    http.delete("/subjects/pv-value").raise_for_status()
    assert register(http, "pv-value", V1) == id1
    assert http.get("/subjects/pv-value/versions").json() == [2]


def test_version_deletes(http):
    register(http, "pv-value", V1)
    register(http, "pv-value", V2)
    register(http, "pv-value", V3)
    assert error(http.delete("/subjects/pv-value/versions/2?permanent=true")) == (404, 40407)
    assert http.delete("/subjects/pv-value/versions/2").json() == 2
    assert error(http.delete("/subjects/pv-value/versions/2")) == (404, 40406)
    assert http.get("/subjects/pv-value/versions").json() == [1, 3]
    assert error(http.get("/subjects/pv-value/versions/2")) == (404, 40402)
    assert http.delete("/subjects/pv-value/versions/latest").json() == 3
    assert http.get("/subjects/pv-value/versions/latest").json()["version"] == 1
    assert http.delete("/subjects/pv-value/versions/2?permanent=true").json() == 2
    assert http.get("/subjects/pv-value/versions?deleted=true").json() == [1, 3]
    assert error(http.delete("/subjects/pv-value/versions/9")) == (404, 40402)
    assert error(http.delete("/subjects/nope/versions/1")) == (404, 40401)
    assert error(http.delete("/subjects/pv-value/versions/0")) == (422, 42202)


def test_mode_is_read_write(http):
    assert http.get("/mode").json() == {"mode": "READWRITE"}
    assert http.get("/mode/any-subject").json() == {"mode": "READWRITE"}


def test_store_failure_is_50001_and_changes_nothing(running_registry, http):
    from schemas.store import StoreError

    def failing_append(key, value):
        raise StoreError("broker unavailable")

    running_registry.store.append = failing_append
    answer = http.post("/subjects/pv-value/versions", json={"schema": V1})
    assert error(answer) == (500, 50001)
    assert "broker unavailable" in answer.json()["message"]
    assert http.get("/subjects").json() == []
