"""ACLs in tests: a broker with the authorizer on and a super user, principals chosen per
request (the session a SASL listener would authenticate), ACL requests as clients send
them (`*_body`, also sent to broker processes)."""

from __future__ import annotations

import contextlib

from broker.protocol.apis import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS
from broker.security.acl import Operation, PatternType, Permission, ResourceType
from broker.server.request import Session

ADMIN = "User:admin"


def authorizer_settings(super_users: str = ADMIN, allow_everyone: bool = False) -> dict:
    """A broker's settings for Kafka's authorizer, its super users (`User:a;User:b`)."""
    return {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": super_users,
        "allow.everyone.if.no.acl.found": str(allow_everyone).lower(),
    }


# In process: the super user of the tests, and a broker's own principal.
AUTHORIZER_SETTINGS = authorizer_settings(f"{ADMIN};User:broker")


@contextlib.contextmanager
def as_principal(broker, principal: str, host: str = "127.0.0.1"):
    """Requests of an in-process broker on a session authenticated as `principal`."""
    before = broker.session
    broker.session = Session(client_host=host, client_port=50001, principal=principal)
    try:
        yield broker
    finally:
        broker.session = before


def creation(
    principal: str,
    operation: Operation,
    resource_type: ResourceType,
    name: str,
    *,
    pattern: PatternType = PatternType.LITERAL,
    permission: Permission = Permission.ALLOW,
    host: str = "*",
) -> dict:
    return {
        "resource_type": resource_type,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": host,
        "operation": operation,
        "permission_type": permission,
    }


def acl_filter(
    resource_type: ResourceType = ResourceType.ANY,
    name: str | None = None,
    pattern: PatternType = PatternType.ANY,
    principal: str | None = None,
    host: str | None = None,
    operation: Operation = Operation.ANY,
    permission: Permission = Permission.ANY,
) -> dict:
    return {
        "resource_type_filter": resource_type,
        "resource_name_filter": name,
        "pattern_type_filter": pattern,
        "principal_filter": principal,
        "host_filter": host,
        "operation": operation,
        "permission_type": permission,
    }


def create_acls(broker, *creations: dict, version: int = 3) -> list[dict]:
    """CreateAcls as the super user; the per-ACL results."""
    with as_principal(broker, ADMIN):
        return broker.call(CREATE_ACLS, version, {"creations": list(creations)})["results"]


def allow(broker, principal: str, operation: Operation, resource_type: ResourceType, name: str,
          **kw) -> None:  # fmt: skip
    (result,) = create_acls(broker, creation(principal, operation, resource_type, name, **kw))
    assert result["error_code"] == 0, result


def deny(broker, principal: str, operation: Operation, resource_type: ResourceType, name: str,
         **kw) -> None:  # fmt: skip
    allow(broker, principal, operation, resource_type, name, permission=Permission.DENY, **kw)


def describe_acls(broker, version: int = 3, **filter_fields) -> dict:
    with as_principal(broker, ADMIN):
        return broker.call(DESCRIBE_ACLS, version, acl_filter(**filter_fields))


def delete_acls(broker, *filters: dict, version: int = 3) -> list[dict]:
    with as_principal(broker, ADMIN):
        return broker.call(DELETE_ACLS, version, {"filters": list(filters)})["filter_results"]


def listed(describe_answer: dict) -> set[tuple]:
    """(type, name, pattern, principal, host, operation, permission) of every ACL listed."""
    return {
        (r["resource_type"], r["resource_name"], r["pattern_type"], a["principal"], a["host"],
         a["operation"], a["permission_type"])
        for r in describe_answer["resources"]
        for a in r["acls"]
    }  # fmt: skip
