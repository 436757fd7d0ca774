"""What the ACL APIs' handlers share: ACLs and filters from and to the wire's fields."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)


def _enum(kind, value: int):
    try:
        return kind(value)
    except ValueError:
        return kind(0)  # UNKNOWN: refused by the checks that follow


def binding_from_wire(creation: dict) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            _enum(ResourceType, creation["resource_type"]),
            creation["resource_name"],
            _enum(PatternType, creation["resource_pattern_type"]),
        ),
        AccessControlEntry(
            creation["principal"],
            creation["host"],
            _enum(Operation, creation["operation"]),
            _enum(Permission, creation["permission_type"]),
        ),
    )


def filter_from_wire(f: dict) -> AclBindingFilter:
    return AclBindingFilter(
        _enum(ResourceType, f["resource_type_filter"]),
        f["resource_name_filter"],
        _enum(PatternType, f["pattern_type_filter"]),
        f["principal_filter"],
        f["host_filter"],
        _enum(Operation, f["operation"]),
        _enum(Permission, f["permission_type"]),
    )


def entry_fields(entry: AccessControlEntry) -> dict:
    return {
        "principal": entry.principal,
        "host": entry.host,
        "operation": int(entry.operation),
        "permission_type": int(entry.permission),
    }


def error_of(exc: Exception | None) -> tuple[ErrorCode, str | None]:
    """A store's outcome as an error code and message (AclError: the request's fault)."""
    if exc is None:
        return ErrorCode.NONE, None
    if isinstance(exc, AclError):
        return ErrorCode.INVALID_REQUEST, str(exc)
    return ErrorCode.UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}: {exc}"


SECURITY_DISABLED_MESSAGE = "No authorizer is configured on the broker (authorizer.class.name)."
