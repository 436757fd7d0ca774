"""The authorizer's decisions, sans-I/O: implied operations, deny scope, wildcards and
prefixes (and the prefix index after removals), authorized-operation bit sets, "some
resource of the type", and the ACL JSON Kafka writes."""

from __future__ import annotations

import pytest

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
    decode_entries,
    encode_entries,
    validate_binding,
)
from broker.security.authorizer import Authorizer, parse_super_users

A = "User:alice"
TOPIC = ResourceType.TOPIC


def entry(op: Operation, permission=Permission.ALLOW, principal=A, host="*"):
    return AccessControlEntry(principal, host, op, permission)


def literal(name: str, kind=TOPIC) -> ResourcePattern:
    return ResourcePattern(kind, name)


def prefixed(name: str) -> ResourcePattern:
    return ResourcePattern(TOPIC, name, PatternType.PREFIXED)


def can(authorizer: Authorizer, op: Operation, name: str = "t", kind=TOPIC) -> bool:
    return authorizer.authorize(A, "10.0.0.1", op, kind, name)


@pytest.mark.parametrize(
    ("granted", "implied"),
    [
        (Operation.READ, {Operation.READ, Operation.DESCRIBE}),
        (Operation.WRITE, {Operation.WRITE, Operation.DESCRIBE}),
        (Operation.DELETE, {Operation.DELETE, Operation.DESCRIBE}),
        (Operation.ALTER, {Operation.ALTER, Operation.DESCRIBE}),
        (Operation.ALTER_CONFIGS, {Operation.ALTER_CONFIGS, Operation.DESCRIBE_CONFIGS}),
        (Operation.DESCRIBE, {Operation.DESCRIBE}),
        (Operation.ALL, {op for op in Operation if op > Operation.ALL}),
    ],
)
def test_implied_operations(granted, implied):
    authorizer = Authorizer()
    authorizer.set_entries(literal("t"), [entry(granted)])
    assert {op for op in Operation if op > Operation.ALL and can(authorizer, op)} == implied


def test_a_deny_denies_its_own_operation_only_and_all_denies_everything():
    authorizer = Authorizer()
    authorizer.set_entries(literal("t"), [entry(Operation.ALL), entry(Operation.DESCRIBE,
                                                                      Permission.DENY)])  # fmt: skip
    assert can(authorizer, Operation.READ) and not can(authorizer, Operation.DESCRIBE)
    authorizer.set_entries(literal("*"), [entry(Operation.ALL, Permission.DENY, "User:*")])
    assert not can(authorizer, Operation.READ)


def test_prefixes_of_every_length_and_their_removal():
    authorizer = Authorizer()
    authorizer.set_entries(prefixed("a"), [entry(Operation.READ)])
    authorizer.set_entries(prefixed("abc"), [entry(Operation.WRITE)])
    authorizer.set_entries(prefixed("abcdef-long"), [entry(Operation.DELETE)])
    assert can(authorizer, Operation.READ, "abcd") and can(authorizer, Operation.WRITE, "abcd")
    assert not can(authorizer, Operation.WRITE, "ab")
    assert not can(authorizer, Operation.DELETE, "abcdef")
    authorizer.set_entries(prefixed("abc"), [])
    assert not can(authorizer, Operation.WRITE, "abcd") and can(authorizer, Operation.READ, "abcd")
    authorizer.set_entries(prefixed("a"), [])
    assert not can(authorizer, Operation.READ, "abcd")
    assert len(authorizer.bindings()) == 1


def test_hosts_principals_super_users_and_allow_everyone():
    authorizer = Authorizer(super_users={"User:root"}, allow_everyone_if_no_acl_found=True)
    assert can(authorizer, Operation.WRITE, "free")  # no ACL at all
    authorizer.set_entries(literal("t"), [entry(Operation.READ, host="10.0.0.2"),
                                          entry(Operation.READ, principal="User:bob")])  # fmt: skip
    assert not can(authorizer, Operation.READ)  # ACLs exist, none applies
    assert authorizer.authorize("User:root", "h", Operation.ALTER, TOPIC, "t")
    assert authorizer.authorize(A, "10.0.0.2", Operation.READ, TOPIC, "t")
    assert parse_super_users(" User:a ; User:b;") == {"User:a", "User:b"}


def test_authorized_operations_bits():
    authorizer = Authorizer()
    authorizer.set_entries(literal("g", ResourceType.GROUP), [entry(Operation.READ)])
    bits = authorizer.authorized_operations(A, "h", ResourceType.GROUP, "g")
    assert bits == (1 << Operation.READ) | (1 << Operation.DESCRIBE)
    assert authorizer.authorized_operations(A, "h", ResourceType.GROUP, "other") == 0


def test_allowed_on_some_resource_of_the_type():
    authorizer = Authorizer()
    assert not authorizer.authorize_any(A, "h", Operation.WRITE, TOPIC)
    authorizer.set_entries(prefixed("app-"), [entry(Operation.WRITE)])
    assert authorizer.authorize_any(A, "h", Operation.WRITE, TOPIC)
    authorizer.set_entries(prefixed("ap"), [entry(Operation.WRITE, Permission.DENY)])
    assert not authorizer.authorize_any(A, "h", Operation.WRITE, TOPIC)  # covered by a deny
    authorizer.set_entries(literal("other"), [entry(Operation.ALL)])
    assert authorizer.authorize_any(A, "h", Operation.WRITE, TOPIC)
    authorizer.set_entries(literal("*"), [entry(Operation.WRITE, Permission.DENY)])
    assert not authorizer.authorize_any(A, "h", Operation.WRITE, TOPIC)


def test_filters_match_as_kafkas():
    authorizer = Authorizer()
    authorizer.set_entries(literal("t"), [entry(Operation.READ)])
    authorizer.set_entries(literal("*"), [entry(Operation.WRITE)])
    authorizer.set_entries(prefixed("t"), [entry(Operation.ALTER)])
    authorizer.set_entries(prefixed("u"), [entry(Operation.ALTER)])
    match = AclBindingFilter(TOPIC, "t1", PatternType.MATCH)
    assert {b.pattern.name for b in authorizer.bindings(match)} == {"*", "t"}
    assert {b.pattern.pattern_type for b in authorizer.bindings(match)} == {
        PatternType.LITERAL, PatternType.PREFIXED
    }  # fmt: skip
    exact = AclBindingFilter(TOPIC, "t", PatternType.LITERAL)
    assert [b.entry.operation for b in authorizer.bindings(exact)] == [Operation.READ]
    assert len(authorizer.bindings(AclBindingFilter(operation=Operation.ALTER))) == 2


def test_the_json_kafka_writes_and_reads():
    entries = {entry(Operation.CLUSTER_ACTION), entry(Operation.ALL, Permission.DENY)}
    data = encode_entries(entries)
    assert b'"operation":"ClusterAction"' in data and b'"permissionType":"Deny"' in data
    assert decode_entries(data) == entries
    with pytest.raises(AclError):
        decode_entries(b'{"version":1,"acls":[{"principal":"User:a"}]}')


def test_an_acl_on_the_cluster_must_name_it():
    cluster = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster")
    validate_binding(AclBinding(cluster, entry(Operation.ALTER)))
    with pytest.raises(AclError, match="kafka-cluster"):
        validate_binding(
            AclBinding(ResourcePattern(ResourceType.CLUSTER, "x"), entry(Operation.ALTER))
        )
