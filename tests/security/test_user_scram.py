"""SCRAM credential administration as functions (APIs 50/51): what is stored, what is
answered, and Kafka's errors for each kind of bad item."""

from __future__ import annotations

import os

from broker.protocol.errors import ErrorCode
from broker.security.scram import (
    MECHANISMS,
    ScramClient,
    ScramCredential,
    ScramServer,
    salted_password,
)
from broker.security.user_scram import (
    altered_users,
    desanitize_user,
    describe,
    plan_alterations,
    sanitize_user,
    scram_entries,
)

SHA256, SHA512 = MECHANISMS["SCRAM-SHA-256"], MECHANISMS["SCRAM-SHA-512"]


def upsertion(user: str, mech=SHA256, password: str = "secret", iterations: int = 4096) -> dict:
    salt = os.urandom(16)
    return {
        "name": user,
        "mechanism": mech.type_code,
        "iterations": iterations,
        "salt": salt,
        "salted_password": salted_password(mech, password, salt, iterations),
    }


def deletion(user: str, mech=SHA256) -> dict:
    return {"name": user, "mechanism": mech.type_code}


def alter(deletions=(), upsertions=()) -> dict:
    return {"deletions": list(deletions), "upsertions": list(upsertions)}


def codes(response: dict) -> dict:
    return {r["user"]: ErrorCode(r["error_code"]) for r in response["results"]}


def test_an_upserted_credential_authenticates_with_the_password():
    plan = plan_alterations(
        alter(upsertions=[upsertion("alice", SHA512, "alice-secret", 8192)]), {}
    )
    assert codes(plan.response(["alice"])) == {"alice": ErrorCode.NONE}
    (stored,) = plan.new_configs.values()
    credential = ScramCredential.from_config(stored["SCRAM-SHA-512"])
    assert credential.iterations == 8192
    # The stored form is the server's half of a real exchange.
    server = ScramServer(SHA512, {"alice": credential}.get)
    client = ScramClient(SHA512, "alice", "alice-secret")
    client.verify(server.receive(client.final_message(server.receive(client.first_message()))))
    assert server.complete


def test_other_keys_of_the_entity_and_other_mechanisms_stay():
    stored = {"alice": {"producer_byte_rate": "1024", "SCRAM-SHA-512": "salt=c2FsdA==,x"}}
    plan = plan_alterations(alter(upsertions=[upsertion("alice")]), stored)
    config = plan.new_configs["alice"]
    assert config["producer_byte_rate"] == "1024" and config["SCRAM-SHA-512"] == "salt=c2FsdA==,x"
    assert "SCRAM-SHA-256" in config
    plan = plan_alterations(alter(deletions=[deletion("alice", SHA512)]), stored)
    assert plan.new_configs == {"alice": {"producer_byte_rate": "1024"}}


def test_kafkas_errors_leave_the_user_untouched():
    stored = {"bob": {}}
    body = alter(
        deletions=[deletion("bob"), deletion("carol", SHA512)],
        upsertions=[
            upsertion("alice", iterations=100),
            upsertion("dave", iterations=20000),
            {**upsertion("erin"), "mechanism": 3},
            upsertion(""),
            upsertion("frank"),
            upsertion("frank"),
            upsertion("grace"),
            {**upsertion("heidi"), "salt": b""},
        ],
    )
    plan = plan_alterations(body, stored)
    users = altered_users(body)
    assert users == ["bob", "carol", "alice", "dave", "erin", "", "frank", "grace", "heidi"]
    assert codes(plan.response(users)) == {
        "bob": ErrorCode.RESOURCE_NOT_FOUND,
        "carol": ErrorCode.RESOURCE_NOT_FOUND,
        "alice": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "dave": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "erin": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        "": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "frank": ErrorCode.DUPLICATE_RESOURCE,
        "grace": ErrorCode.NONE,
        "heidi": ErrorCode.UNACCEPTABLE_CREDENTIAL,
    }
    assert list(plan.new_configs) == ["grace"]
    messages = {r["user"]: r["error_message"] for r in plan.response(users)["results"]}
    assert "Too few iterations" in messages["alice"] and "Too many" in messages["dave"]
    # One good and one refused item of the same user: nothing of that user changes.
    plan = plan_alterations(
        alter(upsertions=[upsertion("ivan", SHA512), upsertion("ivan", iterations=1)]), {}
    )
    assert plan.new_configs == {} and codes(plan.response(["ivan"])) == {
        "ivan": ErrorCode.UNACCEPTABLE_CREDENTIAL
    }
    # A deletion and an upsertion of the same user and mechanism are a duplicate too.
    plan = plan_alterations(alter([deletion("judy")], [upsertion("judy")]), {})
    assert codes(plan.response(["judy"])) == {"judy": ErrorCode.DUPLICATE_RESOURCE}


def test_describe_shows_mechanisms_and_iterations_only():
    created = plan_alterations(
        alter(upsertions=[upsertion("alice", SHA512, iterations=8192), upsertion("alice")]), {}
    ).new_configs
    stored = {**created, "bob": {"producer_byte_rate": "1"}}
    everyone = describe({"users": None}, stored)
    assert everyone["error_code"] == 0
    assert everyone["results"] == [
        {
            "user": "alice",
            "error_code": 0,
            "error_message": None,
            "credential_infos": [
                {"mechanism": 1, "iterations": 4096},
                {"mechanism": 2, "iterations": 8192},
            ],
        }
    ]
    named = describe({"users": [{"name": "bob"}, {"name": "alice"}, {"name": "bob"}]}, stored)
    assert codes(named) == {"bob": ErrorCode.DUPLICATE_RESOURCE, "alice": ErrorCode.NONE}
    missing = describe({"users": [{"name": "zoe"}]}, stored)
    assert codes(missing) == {"zoe": ErrorCode.RESOURCE_NOT_FOUND}
    assert scram_entries(stored["alice"])["SCRAM-SHA-512"].iterations == 8192


def test_user_names_in_znode_names_as_kafka_sanitizes_them():
    assert sanitize_user("alice") == "alice"
    assert sanitize_user("CN=x y,O=z*~") == "CN%3Dx%20y%2CO%3Dz%2A%7E"
    assert desanitize_user(sanitize_user("CN=x y,O=z*~/ü")) == "CN=x y,O=z*~/ü"
