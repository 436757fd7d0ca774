"""kafka-acls against a broker process with the authorizer on: ACLs added, listed (all,
by resource, by pattern type), removed with --force or after a "y", kept after an "n";
Kafka's lines; bad arguments exit 2; a broker without an authorizer is an error (exit 1).
The ACLs made are checked with kafka-python's admin client, an implementation of its own."""

from __future__ import annotations

import io

import pytest
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePatternFilter,
    ResourceType,
)

from broker.tools import acls

EVERY = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                  ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))  # fmt: skip


@pytest.fixture
def secured(acl_broker_factory):
    return acl_broker_factory(super_users="User:ANONYMOUS")


@pytest.fixture
def run(secured, capsys, monkeypatch):
    """run(*args, stdin="") -> (exit code, stdout, stderr) of kafka-acls."""

    def call(*args: str, stdin: str = "", bootstrap: str | None = None):
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        capsys.readouterr()
        code = acls.main(["--bootstrap-server", bootstrap or secured.bootstrap, *args])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def stored(secured) -> set[tuple]:
    admin = KafkaAdminClient(bootstrap_servers=secured.bootstrap)
    try:
        found, _ = admin.describe_acls(EVERY)
    finally:
        admin.close()
    return {
        (a.resource_pattern.resource_type.name, a.resource_pattern.resource_name,
         a.resource_pattern.pattern_type.name, a.principal, a.host, a.operation.name,
         a.permission_type.name)
        for a in found
    }  # fmt: skip


def test_add_list_and_remove(run, secured):
    code, out, err = run(
        "--add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
        "--operation", "Read", "--operation", "Describe", "--topic", "t", "--group", "g",
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert out.startswith(
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, "
        "patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n"
    )
    assert "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=g" in out
    assert len(stored(secured)) == 8

    code, out, _ = run(
        "--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9",
        "--topic", "sales-", "--resource-pattern-type", "prefixed",
    )  # fmt: skip
    assert code == 0
    assert ("TOPIC", "sales-", "PREFIXED", "User:mallory", "10.0.0.9", "ALL", "DENY") in (
        stored(secured)
    )
    code, out, _ = run("--add", "--allow-principal", "User:ops", "--cluster",
                       "--operation", "ClusterAction")  # fmt: skip
    assert code == 0

    code, out, _ = run("--list")
    assert code == 0 and out.count("Current ACLs for resource") == 4
    code, out, _ = run("--list", "--topic", "sales-eu", "--resource-pattern-type", "match")
    assert "name=sales-, patternType=PREFIXED" in out and "name=t," not in out

    # remove: one principal's READ, after a "y"; then everything of g, with --force
    code, out, _ = run(
        "--remove", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "t",
        stdin="y\n",
    )  # fmt: skip
    assert code == 0 and "Are you sure you want to remove ACLs" in out
    assert ("TOPIC", "t", "LITERAL", "User:bob", "*", "READ", "ALLOW") not in stored(secured)
    code, out, _ = run("--remove", "--group", "g", stdin="n\n")
    assert "Nothing removed." in out
    assert any(a[0] == "GROUP" for a in stored(secured))
    code, out, _ = run("--remove", "--group", "g", "--force")
    assert code == 0 and not any(a[0] == "GROUP" for a in stored(secured))


def test_an_operation_the_resource_does_not_have_is_refused(run, secured):
    code, _, err = run("--add", "--allow-principal", "User:a", "--group", "g",
                       "--operation", "Write")  # fmt: skip
    assert code == 1 and "only supports operations" in err
    assert stored(secured) == set()


def test_a_broker_without_authorizer_is_an_error(run, broker):
    code, _, err = run("--list", bootstrap=broker.bootstrap)
    assert code == 1 and "SECURITY_DISABLED" in err


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--list", "--add"], "exactly one action"),
        (["--add", "--topic", "t"], "--allow-principal or --deny-principal"),
        (["--add", "--allow-principal", "User:a"], "a resource is needed"),
        (["--add", "--allow-principal", "alice", "--topic", "t"], "not of the form"),
        (["--add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly"],
         "unknown operation"),
        (["--list", "--allow-host", "h"], "--allow-host goes with --allow-principal"),
        (["--add", "--allow-principal", "User:a", "--topic", "t",
          "--resource-pattern-type", "match"], "literal or prefixed"),
        (["--list", "--force"], "--force goes with --remove"),
    ],
)  # fmt: skip
def test_bad_arguments_exit_2(run, capsys, args, problem):
    with pytest.raises(SystemExit) as exit_:
        run(*args)
    assert exit_.value.code == 2
    assert problem in capsys.readouterr().err
