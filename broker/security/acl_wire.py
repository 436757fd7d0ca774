"""ACLs and filters as CreateAcls, DescribeAcls and DeleteAcls carry them, both ways: the
broker's handlers read what clients write, our AdminClient reads what the broker answers."""

from __future__ import annotations

from broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
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
    """A CreateAcls creation (its pattern type is `resource_pattern_type`)."""
    return binding_from_fields(creation, creation, pattern_type_key="resource_pattern_type")


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


def binding_to_wire(binding: AclBinding) -> dict:
    """A CreateAcls creation."""
    fields = binding_fields(binding)
    fields["resource_pattern_type"] = fields.pop("pattern_type")
    return fields


def filter_to_wire(f: AclBindingFilter) -> dict:
    """A DescribeAcls request, or a DeleteAcls filter."""
    return {
        "resource_type_filter": int(f.resource_type),
        "resource_name_filter": f.name,
        "pattern_type_filter": int(f.pattern_type),
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": int(f.operation),
        "permission_type": int(f.permission),
    }


def binding_fields(binding: AclBinding) -> dict:
    """An ACL as DeleteAcls lists it (resource and entry fields side by side)."""
    p = binding.pattern
    return {
        "resource_type": int(p.resource_type),
        "resource_name": p.name,
        "pattern_type": int(p.pattern_type),
        **entry_fields(binding.entry),
    }


def binding_from_fields(
    resource: dict, acl: dict, pattern_type_key: str = "pattern_type"
) -> AclBinding:
    """An ACL from a DescribeAcls resource and one of its ACLs, or from a DeleteAcls
    matching ACL or a CreateAcls creation (both arguments the same dict)."""
    return AclBinding(
        ResourcePattern(
            _enum(ResourceType, resource["resource_type"]),
            resource["resource_name"],
            _enum(PatternType, resource[pattern_type_key]),
        ),
        AccessControlEntry(
            acl["principal"],
            acl["host"],
            _enum(Operation, acl["operation"]),
            _enum(Permission, acl["permission_type"]),
        ),
    )
