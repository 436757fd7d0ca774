"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51) in process, stored
in a real ZooKeeper as a cluster stores them: /config/users/<user> in Kafka's layout and
a change notification per changed user (which tests/server/test_config_changes.py
follows to the authenticator)."""

from __future__ import annotations

import json

import pytest

from broker.protocol.apis import ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_USER_SCRAM_CREDENTIALS
from broker.protocol.errors import ErrorCode
from broker.security.scram import MECHANISMS, ScramCredential
from broker.server.modes.zk_topic_admin import ZkTopicAdmin
from broker.zk import layout as z
from broker.zk.client import ZkClient
from tests.helpers.inprocess_broker import InProcessBroker
from tests.security.test_user_scram import upsertion

SHA256, SHA512 = MECHANISMS["SCRAM-SHA-256"], MECHANISMS["SCRAM-SHA-512"]


@pytest.fixture
def zk_broker(tmp_path, zk_connect):
    """An in-process broker whose admin is the cluster's (ZooKeeper)."""
    broker = InProcessBroker(tmp_path / "logs")
    zk = ZkClient(zk_connect, session_timeout_ms=6000)
    broker.loop.run_until_complete(zk.start())
    broker.loop.run_until_complete(zk.ensure_paths(z.PERSISTENT_PATHS))
    state = broker.state
    state.admin = ZkTopicAdmin(
        zk, state.metadata, state.replicas.topic_configs, 1, 1, broker.loop.create_task
    )
    broker.zk = zk
    yield broker
    broker.loop.run_until_complete(zk.close())
    broker.close()


def znode(broker, path: str):
    found = broker.loop.run_until_complete(broker.zk.get(path))
    return None if found is None else json.loads(found[0])


def test_alter_and_describe_through_zookeeper(zk_broker):
    body = {
        "deletions": [{"name": "bob", "mechanism": 1}],
        "upsertions": [upsertion("alice", SHA512, iterations=8192), upsertion("alice")],
    }
    answer = zk_broker.call(ALTER_USER_SCRAM_CREDENTIALS, 0, body)
    assert [(r["user"], r["error_code"]) for r in answer["results"]] == [
        ("bob", ErrorCode.RESOURCE_NOT_FOUND),
        ("alice", 0),
    ]
    stored = znode(zk_broker, "/config/users/alice")
    assert stored["version"] == 1 and sorted(stored["config"]) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert ScramCredential.from_config(stored["config"]["SCRAM-SHA-512"]).iterations == 8192
    assert znode(zk_broker, "/config/users/bob") is None  # refused: nothing written
    changes = zk_broker.loop.run_until_complete(zk_broker.zk.get_children(z.CONFIG_CHANGES))
    assert [znode(zk_broker, f"{z.CONFIG_CHANGES}/{c}") for c in changes] == [
        {"version": 2, "entity_path": "users/alice"}
    ]

    described = zk_broker.call(DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
    assert described["results"] == [
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
    named = zk_broker.call(
        DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [{"name": "alice"}, {"name": "nobody"}]}
    )
    assert [(r["user"], r["error_code"]) for r in named["results"]] == [
        ("alice", 0),
        ("nobody", ErrorCode.RESOURCE_NOT_FOUND),
    ]

    deleted = zk_broker.call(
        ALTER_USER_SCRAM_CREDENTIALS,
        0,
        {"deletions": [{"name": "alice", "mechanism": 2}], "upsertions": []},
    )
    assert deleted["results"][0]["error_code"] == 0
    assert sorted(znode(zk_broker, "/config/users/alice")["config"]) == ["SCRAM-SHA-256"]


def test_a_user_name_kafka_sanitizes(zk_broker):
    answer = zk_broker.call(
        ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [], "upsertions": [upsertion("CN=a b")]}
    )
    assert answer["results"][0]["error_code"] == 0
    assert znode(zk_broker, "/config/users/CN%3Da%20b") is not None
    described = zk_broker.call(DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": []})
    assert [r["user"] for r in described["results"]] == ["CN=a b"]
