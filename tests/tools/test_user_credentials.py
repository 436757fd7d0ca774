"""SCRAM credentials administered against a cluster of broker processes on ZooKeeper:
kafka-configs --entity-type users through the brokers and, before any broker runs,
through --zookeeper; our AdminClient, confluent-kafka's and kafka-python's admin clients;
each checked in ZooKeeper (/config/users/<user> in Kafka's layout) and by describing
through another client. Secrets are never printed."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import ScramCredentialInfo as ConfluentInfo
from confluent_kafka.admin import ScramMechanism as ConfluentMechanism
from confluent_kafka.admin import UserScramCredentialDeletion as ConfluentDeletion
from confluent_kafka.admin import UserScramCredentialUpsertion as ConfluentUpsertion
from kafka import KafkaAdminClient
from kafka.admin import UserScramCredentialUpsertion as KafkaPythonUpsertion

from broker.client.admin import (
    AdminClient,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from broker.processes import Cluster, kazoo_session
from broker.protocol.errors import ErrorCode, ResourceNotFoundError
from broker.security.credentials import Credentials
from broker.security.scram import ScramCredential
from broker.tools import configs
from tests.helpers.cluster import fresh, wait_for

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("cluster"), 2, zookeeper=zookeeper) as c:
        yield c


def zk_user(cluster, user: str) -> dict | None:
    with kazoo_session(cluster.zookeeper_connect) as zk:
        if not zk.exists(f"/config/users/{user}"):
            return None
        return json.loads(zk.get(f"/config/users/{user}")[0])


def run(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = configs.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_configs_tool_through_the_brokers(cluster, capsys):
    user = fresh("alice")
    b = ["--bootstrap-server", cluster.bootstrap, "--entity-type", "users"]
    code, out, err = run(
        capsys,
        *b,
        "--alter",
        "--entity-name",
        user,
        "--add-config",
        "SCRAM-SHA-512=[iterations=8192,password=alice-secret],SCRAM-SHA-256=[password=pw]",
    )
    assert (code, out, err) == (0, f"Completed updating config for user {user}.\n", "")
    stored = zk_user(cluster, user)
    assert stored["version"] == 1
    assert ScramCredential.from_config(stored["config"]["SCRAM-SHA-512"]).iterations == 8192

    code, out, _ = run(capsys, *b, "--describe", "--entity-name", user)
    assert code == 0
    assert out == (
        f"SCRAM credential configs for user-principal '{user}' are "
        "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=8192\n"
    )
    assert "alice-secret" not in out and "salt" not in out

    code, out, _ = run(
        capsys, *b, "--alter", "--entity-name", user, "--delete-config", "SCRAM-SHA-256"
    )
    assert code == 0
    assert sorted(zk_user(cluster, user)["config"]) == ["SCRAM-SHA-512"]
    # Deleting it again: Kafka's RESOURCE_NOT_FOUND message, exit 1.
    code, out, err = run(
        capsys, *b, "--alter", "--entity-name", user, "--delete-config", "SCRAM-SHA-256"
    )
    assert code == 1 and "does not exist" in err
    code, _, err = run(capsys, *b, "--describe", "--entity-name", fresh("nobody"))
    assert code == 1 and "RESOURCE_NOT_FOUND" in err
    code, _, err = run(
        capsys,
        *b,
        "--alter",
        "--entity-name",
        user,
        "--add-config",
        "SCRAM-SHA-256=[iterations=10,password=x]",
    )
    assert code == 1 and "Too few iterations" in err


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--entity-type", "users", "--describe"], "exactly one of --bootstrap-server"),
        (["--zookeeper", "z:1", "--entity-type", "topics", "--describe"], "users only"),
        (["--credentials-file", "f", "--zookeeper", "z:1", "--entity-type", "users", "--describe"], "exactly one of"),
        (["--zookeeper", "z:1", "--entity-type", "users", "--alter", "--add-config", "SCRAM-SHA-256=[password=x]"], "--entity-name"),
        (["--zookeeper", "z:1", "--entity-type", "users", "--alter", "--entity-name", "a", "--add-config", "MD5=[password=x]"], "only SCRAM credentials"),
        (["--zookeeper", "z:1", "--entity-type", "users", "--alter", "--entity-name", "a", "--add-config", "SCRAM-SHA-256=[iterations=5]"], "a password is needed"),
        (["--zookeeper", "z:1", "--entity-type", "users", "--entity-default", "--describe"], "--entity-default"),
    ],
)  # fmt: skip
def test_bad_user_arguments_exit_2(capsys, args, problem):
    with pytest.raises(SystemExit) as exit_:
        configs.main(args)
    assert exit_.value.code == 2
    assert problem in capsys.readouterr().err


def test_bootstrap_through_zookeeper_reaches_running_brokers(cluster, capsys):
    user = fresh("admin")
    z = ["--zookeeper", cluster.zookeeper_connect, "--entity-type", "users"]
    code, out, _ = run(
        capsys,
        *z,
        "--alter",
        "--entity-name",
        user,
        "--add-config",
        "SCRAM-SHA-256=[password=admin-secret]",
    )
    assert (code, out) == (0, f"Completed updating config for entity: user-principal '{user}'.\n")
    assert sorted(zk_user(cluster, user)["config"]) == ["SCRAM-SHA-256"]
    code, out, _ = run(capsys, *z, "--describe", "--entity-name", user)
    assert (
        out
        == f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=4096\n"
    )
    # The brokers read the same store.
    with AdminClient(cluster.bootstrap) as admin:
        assert admin.describe_user_scram_credentials([user]) == {
            user: [ScramCredentialInfo("SCRAM-SHA-256", 4096)]
        }


def test_our_admin_client(cluster):
    user, ghost = fresh("bob"), fresh("ghost")
    with AdminClient(cluster.bootstrap) as admin:
        result = admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(user, "SCRAM-SHA-256", "pw", 4096),
                UserScramCredentialUpsertion(user, "SCRAM-SHA-512", "pw", 5000),
                UserScramCredentialDeletion(ghost, "SCRAM-SHA-256"),
            ]
        )
        assert result == {user: ErrorCode.NONE, ghost: ErrorCode.RESOURCE_NOT_FOUND}
        assert admin.describe_user_scram_credentials([user]) == {
            user: [
                ScramCredentialInfo("SCRAM-SHA-256", 4096),
                ScramCredentialInfo("SCRAM-SHA-512", 5000),
            ]
        }
        assert user in admin.describe_user_scram_credentials()
        with pytest.raises(ResourceNotFoundError):
            admin.describe_user_scram_credentials([fresh("ghost")])
        with pytest.raises(ValueError, match="SCRAM-SHA-1"):
            admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, "SCRAM-SHA-1")])


def test_confluent_kafkas_admin_client(cluster):
    user = fresh("carol")
    admin = ConfluentAdmin({"bootstrap.servers": cluster.bootstrap})
    info = ConfluentInfo(ConfluentMechanism.SCRAM_SHA_512, 8192)
    futures = admin.alter_user_scram_credentials([ConfluentUpsertion(user, info, b"carol-secret")])
    futures[user].result(30)
    described = admin.describe_user_scram_credentials([user])[user].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ConfluentMechanism.SCRAM_SHA_512, 8192)
    ]
    with AdminClient(cluster.bootstrap) as ours:
        assert ours.describe_user_scram_credentials([user]) == {
            user: [ScramCredentialInfo("SCRAM-SHA-512", 8192)]
        }
    futures = admin.alter_user_scram_credentials(
        [ConfluentDeletion(user, ConfluentMechanism.SCRAM_SHA_512)]
    )
    futures[user].result(30)
    wait_for(lambda: zk_user(cluster, user)["config"] == {}, "credential deleted")


def test_kafka_pythons_admin_client(cluster):
    user = fresh("dave")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        errors = admin.alter_user_scram_credentials(
            [KafkaPythonUpsertion(user, "SCRAM-SHA-256", "dave-secret", iterations=4096)]
        )
        assert errors == {user: None}
        described = admin.describe_user_scram_credentials([user])
        assert described[user]["error"] is None
        assert [
            (int(i["mechanism"]), i["iterations"]) for i in described[user]["credential_infos"]
        ] == [(1, 4096)]
    finally:
        admin.close()


def test_bootstrap_through_a_single_brokers_credentials_file(tmp_path, capsys):
    """The file a single broker's sasl.scram.credentials.file names: written as the broker
    writes it, checked as the broker checks, read back by the broker's Credentials."""
    path = tmp_path / "scram.json"
    f = ["--credentials-file", str(path), "--entity-type", "users"]
    add = "SCRAM-SHA-512=[iterations=8192,password=admin-secret]"
    code, out, _ = run(capsys, *f, "--alter", "--entity-name", "admin", "--add-config", add)
    assert (code, out) == (0, "Completed updating config for entity: user-principal 'admin'.\n")
    credential = Credentials(path).scram("admin", "SCRAM-SHA-512")
    assert credential is not None and credential.iterations == 8192
    assert "admin-secret" not in path.read_text()
    code, out, _ = run(capsys, *f, "--describe")
    assert (
        out
        == "SCRAM credential configs for user-principal 'admin' are SCRAM-SHA-512=iterations=8192\n"
    )
    code, _, err = run(
        capsys, *f, "--alter", "--entity-name", "admin", "--delete-config", "SCRAM-SHA-256"
    )
    assert code == 1 and "does not exist" in err
    code, _, _ = run(
        capsys, *f, "--alter", "--entity-name", "admin", "--delete-config", "SCRAM-SHA-512"
    )
    assert code == 0 and Credentials(path).users() == {}
