"""Authorization decisions over a cache of ACLs, as Kafka's AclAuthorizer decides them.

Sans-I/O: the store (acl_store.py) reads and writes the ACLs and tells the cache every
change (`set_entries`); handlers ask `authorize`. The rules: a super user may do
anything; otherwise the ACLs that apply are those of the resource's literal name, of the
wildcard name `*`, and of every prefixed pattern the name starts with. None at all:
allowed only with `allow.everyone.if.no.acl.found`. A DENY that applies (principal or
`User:*`, host or `*`, the operation or ALL) wins; else an ALLOW of the operation or of
one implying it (acl.GRANTED_BY) allows; else denied.

The hot path is a few dictionary look-ups: ACLs are indexed by resource type and name,
and prefixed patterns by type and prefix, probed once per distinct prefix length present
(never a scan of every ACL).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from broker.security.acl import (
    DENIED_BY,
    GRANTED_BY,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    authorized_operations_bits,
)

_NO_ENTRIES: frozenset[AccessControlEntry] = frozenset()


def parse_super_users(value: str | None) -> frozenset[str]:
    """`super.users` is `User:a;User:b` (semicolons: principal names may hold commas)."""
    return frozenset(p.strip() for p in (value or "").split(";") if p.strip())


class Authorizer:
    def __init__(
        self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._literal: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = defaultdict(
            dict
        )
        self._prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = defaultdict(
            dict
        )
        # type -> prefix length -> how many prefixed patterns have it; and the lengths
        # sorted, so a name is probed only with the prefix lengths it can have.
        self._prefix_counts: dict[ResourceType, dict[int, int]] = defaultdict(dict)
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}

    # -- the cache ------------------------------------------------------------------------------
    def entries(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        index = self._index(pattern)
        return index.get(pattern.name, _NO_ENTRIES)

    def set_entries(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """The ACLs of one resource pattern as they are now (empty: it has none)."""
        entries = frozenset(entries)
        index = self._index(pattern)
        had = pattern.name in index
        if entries:
            index[pattern.name] = entries
        else:
            index.pop(pattern.name, None)
        if pattern.pattern_type == PatternType.PREFIXED and had != bool(entries):
            counts = self._prefix_counts[pattern.resource_type]
            n = len(pattern.name)
            counts[n] = counts.get(n, 0) + (1 if entries else -1)
            if not counts[n]:
                del counts[n]
            self._prefix_lengths[pattern.resource_type] = tuple(sorted(counts))

    def clear(self) -> None:
        self._literal.clear()
        self._prefixed.clear()
        self._prefix_counts.clear()
        self._prefix_lengths.clear()

    def _index(self, pattern: ResourcePattern) -> dict[str, frozenset[AccessControlEntry]]:
        if pattern.pattern_type == PatternType.LITERAL:
            return self._literal[pattern.resource_type]
        if pattern.pattern_type == PatternType.PREFIXED:
            return self._prefixed[pattern.resource_type]
        raise ValueError(f"ACLs are kept for literal and prefixed patterns, not {pattern}")

    def bindings(self, filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """Every ACL the filter matches (all of them without one), in a stable order."""
        found = []
        for pattern_type, by_type in (
            (PatternType.LITERAL, self._literal),
            (PatternType.PREFIXED, self._prefixed),
        ):
            for resource_type, by_name in by_type.items():
                for name, entries in by_name.items():
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    if filter is not None and not filter.matches_pattern(pattern):
                        continue
                    found += [
                        AclBinding(pattern, e)
                        for e in entries
                        if filter is None or filter.matches_entry(e)
                    ]
        return sorted(found, key=_binding_order)

    # -- decisions ------------------------------------------------------------------------------
    def _applicable(self, resource_type: ResourceType, name: str) -> list:
        """The entry sets of every pattern that applies to the resource."""
        found = []
        literal = self._literal.get(resource_type)
        if literal:
            for key in (name, WILDCARD):
                entries = literal.get(key)
                if entries:
                    found.append(entries)
        lengths = self._prefix_lengths.get(resource_type)
        if lengths:
            prefixed = self._prefixed[resource_type]
            longest = len(name)
            for n in lengths:
                if n > longest:
                    break
                entries = prefixed.get(name[:n])
                if entries:
                    found.append(entries)
        return found

    def authorize(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        applicable = self._applicable(resource_type, name)
        if not applicable:
            return self.allow_everyone_if_no_acl_found
        return _decide(applicable, principal, host, operation)

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The bit set of the operations on the resource this principal may do."""
        supported = SUPPORTED_OPERATIONS[resource_type]
        if principal in self.super_users:
            return authorized_operations_bits(supported)
        applicable = self._applicable(resource_type, name)
        if not applicable:
            return authorized_operations_bits(
                supported if self.allow_everyone_if_no_acl_found else ()
            )
        return authorized_operations_bits(
            op for op in supported if _decide(applicable, principal, host, op)
        )

    def authorize_any(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """May the principal do `operation` on some resource of the type (Kafka's
        authorizeByResourceType, e.g. an idempotent producer with WRITE on any topic)?
        Some ALLOW applies to a pattern that no DENY of the same principal and host covers."""
        if principal in self.super_users:
            return True
        literal = self._literal.get(resource_type) or {}
        prefixed = self._prefixed.get(resource_type) or {}
        if not literal and not prefixed:
            return self.allow_everyone_if_no_acl_found
        denied_literal, denied_prefixes = set(), []
        allowed: list[ResourcePattern] = []
        for pattern_type, by_name in (
            (PatternType.LITERAL, literal),
            (PatternType.PREFIXED, prefixed),
        ):
            for name, entries in by_name.items():
                for e in entries:
                    if not e.applies_to(principal, host):
                        continue
                    if e.permission == Permission.DENY and e.operation in DENIED_BY[operation]:
                        if pattern_type == PatternType.LITERAL:
                            denied_literal.add(name)
                        else:
                            denied_prefixes.append(name)
                    elif e.permission == Permission.ALLOW and e.operation in GRANTED_BY[operation]:
                        allowed.append(ResourcePattern(resource_type, name, pattern_type))
        if WILDCARD in denied_literal or "" in denied_prefixes:
            return False
        for pattern in allowed:
            if any(pattern.name.startswith(p) for p in denied_prefixes):
                continue
            if pattern.pattern_type == PatternType.LITERAL and pattern.name in denied_literal:
                continue
            return True
        return False


def _decide(applicable: list, principal: str, host: str, operation: Operation) -> bool:
    denied_by, granted_by = DENIED_BY[operation], GRANTED_BY[operation]
    allowed = False
    for entries in applicable:
        for e in entries:
            if not (
                (e.principal == principal or e.principal == WILDCARD_PRINCIPAL)
                and (e.host == host or e.host == WILDCARD)
            ):
                continue
            if e.permission == Permission.DENY:
                if e.operation in denied_by:
                    return False  # deny wins
            elif e.operation in granted_by:
                allowed = True
    return allowed


def _binding_order(binding: AclBinding) -> tuple:
    p, e = binding.pattern, binding.entry
    return (int(p.resource_type), int(p.pattern_type), p.name, e.principal, e.host,
            int(e.operation), int(e.permission))  # fmt: skip


def authorizer_from_config(config) -> Authorizer | None:
    """The broker's authorizer, or None when `authorizer.class.name` is empty."""
    if not config["authorizer.class.name"]:
        return None
    return Authorizer(
        parse_super_users(config["super.users"]), config["allow.everyone.if.no.acl.found"]
    )
