"""ACLs as Kafka's authorizer models them: pure data, matching and the JSON Kafka 2.x keeps
in ZooKeeper (no I/O here).

An ACL binding is a resource pattern (resource type, name, LITERAL or PREFIXED) and an
entry (principal, host, operation, ALLOW or DENY). The numeric codes are the wire
protocol's (CreateAcls, DescribeAcls, DeleteAcls); the names are the ones Kafka writes in
`/kafka-acl` (`Topic`, `Read`, `Allow`, ...). Filters (DescribeAcls, DeleteAcls) add ANY
to every field and MATCH to the pattern type: the patterns that would apply to a name.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The one name the cluster resource has, and the wildcards of names, hosts and principals.
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

# Kafka's names, as ZooKeeper's znodes and JSON spell them.
RESOURCE_TYPE_NAMES = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
}
OPERATION_NAMES = {
    Operation.ALL: "All",
    Operation.READ: "Read",
    Operation.WRITE: "Write",
    Operation.CREATE: "Create",
    Operation.DELETE: "Delete",
    Operation.ALTER: "Alter",
    Operation.DESCRIBE: "Describe",
    Operation.CLUSTER_ACTION: "ClusterAction",
    Operation.DESCRIBE_CONFIGS: "DescribeConfigs",
    Operation.ALTER_CONFIGS: "AlterConfigs",
    Operation.IDEMPOTENT_WRITE: "IdempotentWrite",
}
PERMISSION_NAMES = {Permission.ALLOW: "Allow", Permission.DENY: "Deny"}

# An ALLOW of the key grants these operations too (Kafka: READ, WRITE, DELETE and ALTER
# imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL implies everything).
# A DENY denies only its own operation (and ALL every operation).
_IMPLIES = {
    Operation.READ: {Operation.DESCRIBE},
    Operation.WRITE: {Operation.DESCRIBE},
    Operation.DELETE: {Operation.DESCRIBE},
    Operation.ALTER: {Operation.DESCRIBE},
    Operation.ALTER_CONFIGS: {Operation.DESCRIBE_CONFIGS},
}
CONCRETE_OPERATIONS = tuple(op for op in Operation if op > Operation.ALL)


def _granting(op: Operation) -> frozenset[Operation]:
    return frozenset({Operation.ALL, op} | {a for a, implied in _IMPLIES.items() if op in implied})


# operation -> the ALLOWed operations that grant it.
GRANTED_BY = {op: _granting(op) for op in CONCRETE_OPERATIONS}
DENIED_BY = {op: frozenset({Operation.ALL, op}) for op in CONCRETE_OPERATIONS}

# What each resource type can be asked for (the authorized-operations bit sets).
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (
        Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE,
        Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.CLUSTER: (
        Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
    ResourceType.DELEGATION_TOKEN: (Operation.DESCRIBE,),
}  # fmt: skip


class AclError(ValueError):
    """A binding or filter that cannot be used; the message says what is wrong."""


@dataclass(frozen=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def matches(self, name: str) -> bool:
        """Does this (concrete) pattern apply to a resource of its type named `name`?"""
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == name or self.name == WILDCARD

    def __str__(self) -> str:
        kind = RESOURCE_TYPE_NAMES.get(self.resource_type, self.resource_type.name)
        return f"{kind}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def applies_to(self, principal: str, host: str) -> bool:
        return (self.principal == principal or self.principal == WILDCARD_PRINCIPAL) and (
            self.host == host or self.host == WILDCARD
        )

    def __str__(self) -> str:
        return (
            f"{self.principal} has {PERMISSION_NAMES[self.permission]} permission for "
            f"operations: {OPERATION_NAMES[self.operation]} from hosts: {self.host}"
        )


@dataclass(frozen=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        return f"{self.pattern}: {self.entry}"


@dataclass(frozen=True)
class AclBindingFilter:
    """None matches any name, principal or host; ANY any type, operation or permission."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH:
            # The patterns that apply to the resource named here (name None: any).
            return self.name is None or (
                pattern.matches(self.name)
                if pattern.pattern_type == PatternType.PREFIXED
                else pattern.name in (self.name, WILDCARD)
            )
        if self.pattern_type not in (PatternType.ANY, pattern.pattern_type):
            return False
        return self.name is None or self.name == pattern.name

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (Operation.ANY, entry.operation)
            and self.permission in (Permission.ANY, entry.permission)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)

    def validate(self) -> None:
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            raise AclError("the filter has an unknown resource or pattern type")
        if self.operation == Operation.UNKNOWN or self.permission == Permission.UNKNOWN:
            raise AclError("the filter has an unknown operation or permission type")


def parse_principal(principal: str) -> tuple[str, str]:
    """`User:alice` -> ("User", "alice"); anything else is refused, as Kafka does."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise AclError(f"principal {principal!r} is not of the form <type>:<name> (User:alice)")
    return kind, name


def validate_binding(binding: AclBinding) -> None:
    """The checks Kafka makes before creating an ACL (INVALID_REQUEST otherwise)."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type not in RESOURCE_TYPE_NAMES:
        raise AclError(f"resource type {pattern.resource_type!r} cannot hold ACLs")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError(f"pattern type {pattern.pattern_type.name} is for filters only")
    if not pattern.name:
        raise AclError("the resource name must not be empty")
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise AclError(f"the cluster resource is named {CLUSTER_NAME!r}, not {pattern.name!r}")
    if entry.operation not in CONCRETE_OPERATIONS and entry.operation != Operation.ALL:
        raise AclError(f"operation {entry.operation.name} is for filters only")
    if entry.permission not in PERMISSION_NAMES:
        raise AclError(f"permission type {entry.permission.name} is for filters only")
    if not entry.host:
        raise AclError("the host must not be empty (use * for any host)")
    parse_principal(entry.principal)


def authorized_operations_bits(operations) -> int:
    """Kafka's authorized-operations field: bit `op` set for each operation allowed."""
    bits = 0
    for op in operations:
        bits |= 1 << op
    return bits


# -- Kafka 2.x's ZooKeeper JSON ---------------------------------------------------------------


def _by_name(names: dict, name: str, what: str):
    for value, known in names.items():
        if known.lower() == name.lower():
            return value
    raise AclError(f"unknown {what} {name!r}")


def resource_type_of(name: str) -> ResourceType:
    """`Topic` (any case, as Kafka's ResourceType.fromString) -> ResourceType.TOPIC."""
    return _by_name(RESOURCE_TYPE_NAMES, name.replace("_", ""), "resource type")


def operation_of(name: str) -> Operation:
    """`Read`, `ClusterAction`, `IDEMPOTENT_WRITE` (any case, with or without _) -> Operation."""
    return _by_name(OPERATION_NAMES, name.replace("_", ""), "operation")


def pattern_type_of(name: str) -> PatternType:
    try:
        return PatternType[name.upper()]
    except KeyError:
        raise AclError(f"unknown pattern type {name!r}") from None


def encode_entries(entries) -> bytes:
    """`{"version":1,"acls":[{"principal","permissionType","operation","host"}]}`."""
    acls = [
        {
            "principal": e.principal,
            "permissionType": PERMISSION_NAMES[e.permission],
            "operation": OPERATION_NAMES[e.operation],
            "host": e.host,
        }
        for e in sorted(entries, key=_entry_order)
    ]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_entries(data: bytes) -> frozenset[AccessControlEntry]:
    try:
        document = json.loads(data) if data else {"acls": []}
        return frozenset(
            AccessControlEntry(
                acl["principal"],
                acl["host"],
                _by_name(OPERATION_NAMES, acl["operation"], "operation"),
                _by_name(PERMISSION_NAMES, acl["permissionType"], "permission type"),
            )
            for acl in document["acls"]
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise AclError(f"not Kafka's ACL JSON: {exc}") from None


def _entry_order(entry: AccessControlEntry) -> tuple:
    return entry.principal, entry.host, int(entry.operation), int(entry.permission)
