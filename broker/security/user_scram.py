"""SCRAM credential administration as functions of requests and stored state: what
DescribeUserScramCredentials (50) answers and what AlterUserScramCredentials (51)
changes, with Kafka's errors. Nothing here reads or writes a store; the handlers
(broker/server/handlers/*_user_scram_credentials.py) do, through the mode's admin.

A user's stored entry is Kafka's: a config map `{"SCRAM-SHA-256": "salt=...,stored_key=...,
server_key=...,iterations=4096", ...}` (ScramCredential.to_config()), in ZooKeeper at
/config/users/<user> in a cluster. Keys other than the mechanisms (Kafka keeps a user's
quotas in the same entity) are kept as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from broker.protocol.errors import ErrorCode
from broker.security.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    MECHANISMS_BY_CODE,
    ScramCredential,
    credential_from_salted,
)

# user -> its stored config map (mechanism name -> ScramCredential.to_config(), and any
# other keys of the entity).
UserConfigs = Mapping[str, Mapping[str, str]]


def scram_entries(config: Mapping[str, str]) -> dict[str, ScramCredential]:
    """The SCRAM credentials of a user's config map, by mechanism name; a malformed one
    raises ScramError."""
    return {
        name: ScramCredential.from_config(value)
        for name, value in config.items()
        if name in MECHANISMS
    }


def stored_configs(
    users: Mapping[str, Mapping[str, ScramCredential]], names: list[str] | None
) -> dict[str, dict[str, str]]:
    """Credentials (broker/security/credentials.py's `users()`) as the config maps the
    APIs work on, of `names` (None: every user); users without any are left out."""
    return {
        user: {mech: c.to_config() for mech, c in users[user].items()}
        for user in (users if names is None else names)
        if user in users
    }


# -- DescribeUserScramCredentials --


def describe(body: dict, stored: UserConfigs) -> dict:
    """The response to a DescribeUserScramCredentials request. `stored` holds the users
    asked for (every user with a SCRAM credential when none is named)."""
    names = [u["name"] for u in body["users"] or []]
    results = []
    if not names:
        names = sorted(u for u, config in stored.items() if scram_entries(config))
    repeated = {n for n in names if names.count(n) > 1}
    for name in dict.fromkeys(names):
        if name in repeated:
            results.append(
                _describe_error(
                    name,
                    ErrorCode.DUPLICATE_RESOURCE,
                    "Cannot describe SCRAM credentials for the same user twice in a single request",
                )
            )
            continue
        entries = scram_entries(stored.get(name, {}))
        if not entries:
            results.append(
                _describe_error(
                    name,
                    ErrorCode.RESOURCE_NOT_FOUND,
                    "Attempt to describe a user credential that does not exist",
                )
            )
            continue
        infos = [
            {"mechanism": MECHANISMS[m].type_code, "iterations": entries[m].iterations}
            for m in MECHANISMS
            if m in entries
        ]
        results.append(
            {"user": name, "error_code": 0, "error_message": None, "credential_infos": infos}
        )
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}


def _describe_error(user: str, code: ErrorCode, message: str) -> dict:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": []}


# -- AlterUserScramCredentials --


class AlterationRefused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class AlterationPlan:
    """Per user of the request: its new config map, or why it is left alone."""

    new_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    refused: dict[str, AlterationRefused] = field(default_factory=dict)

    def response(self, users: list[str]) -> dict:
        """The answer, one result per user in request order."""
        results = []
        for user in users:
            refusal = self.refused.get(user)
            code, message = (refusal.code, refusal.message) if refusal else (ErrorCode.NONE, None)
            results.append({"user": user, "error_code": code, "error_message": message})
        return {"throttle_time_ms": 0, "results": results}


def altered_users(body: dict) -> list[str]:
    """The users a request touches, in the order they first appear (deletions first)."""
    return list(dict.fromkeys(item["name"] for item in body["deletions"] + body["upsertions"]))


def plan_alterations(body: dict, stored: UserConfigs) -> AlterationPlan:
    """What an AlterUserScramCredentials request changes. A user with any refused item
    keeps its credentials untouched (Kafka's rule); the others get their new config map
    (the caller stores it, and an empty map removes the user's SCRAM entries)."""
    plan = AlterationPlan()
    seen: dict[str, set[int]] = {}
    items = [(d, False) for d in body["deletions"]] + [(u, True) for u in body["upsertions"]]
    for item, _ in items:
        codes = seen.setdefault(item["name"], set())
        if item["mechanism"] in codes and item["name"] not in plan.refused:
            plan.refused[item["name"]] = AlterationRefused(
                ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            )
        codes.add(item["mechanism"])
    for item, upsert in items:
        user = item["name"]
        if user in plan.refused:
            continue
        try:
            config = plan.new_configs.get(user)
            if config is None:
                config = plan.new_configs[user] = dict(stored.get(user, {}))
            _alter(config, item, upsert)
        except AlterationRefused as refusal:
            plan.refused[user] = refusal
            plan.new_configs.pop(user, None)
    return plan


def _alter(config: dict[str, str], item: dict, upsert: bool) -> None:
    if not item["name"]:
        raise AlterationRefused(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    mech = MECHANISMS_BY_CODE.get(item["mechanism"])
    if mech is None:
        raise AlterationRefused(
            ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            f"Unknown SCRAM mechanism {item['mechanism']} (1: SCRAM-SHA-256, 2: SCRAM-SHA-512)",
        )
    if not upsert:
        if mech.name not in config:
            raise AlterationRefused(
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
        del config[mech.name]
        return
    iterations = item["iterations"]
    if iterations < mech.min_iterations:
        raise AlterationRefused(
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"Too few iterations: {iterations} (at least {mech.min_iterations} for {mech.name})",
        )
    if iterations > MAX_ITERATIONS:
        raise AlterationRefused(
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"Too many iterations: {iterations} (at most {MAX_ITERATIONS})",
        )
    salt, salted = bytes(item["salt"] or b""), bytes(item["salted_password"] or b"")
    if not salt or not salted:
        raise AlterationRefused(
            ErrorCode.UNACCEPTABLE_CREDENTIAL, "The salt and the salted password must not be empty"
        )
    config[mech.name] = credential_from_salted(mech, salted, salt, iterations).to_config()


# -- names in ZooKeeper --


def sanitize_user(name: str) -> str:
    """A user name as Kafka writes it in a znode name (its Sanitizer: URL encoding as
    Java's URLEncoder, with %20 for a space and %2A for `*`)."""
    return quote(name, safe=".-_").replace("~", "%7E")


def desanitize_user(name: str) -> str:
    return unquote(name)
