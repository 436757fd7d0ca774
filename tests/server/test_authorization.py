"""Authorization in process: every API's check with a chosen principal (the session a
SASL listener authenticates), Kafka's error codes, deny over allow, prefixed and wildcard
ACLs, super users, allow.everyone.if.no.acl.found, Metadata hiding topics, and the ACL
APIs themselves with their file store on a single broker."""

from __future__ import annotations

import pytest

from broker.protocol.apis import (
    ALTER_CONFIGS,
    ALTER_USER_SCRAM_CREDENTIALS,
    CONTROLLED_SHUTDOWN,
    CREATE_ACLS,
    CREATE_PARTITIONS,
    DELETE_TOPICS,
    DESCRIBE_ACLS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    ELECT_LEADERS,
    FETCH,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    METADATA,
    OFFSET_FOR_LEADER_EPOCH,
    PRODUCE,
    STOP_REPLICA,
    UPDATE_METADATA,
)
from broker.protocol.errors import ErrorCode as E
from broker.security.acl import Operation as Op
from broker.security.acl import PatternType, Permission
from broker.security.acl import ResourceType as R
from broker.security.acl_store import ACLS_FILE
from tests.helpers import groups as g
from tests.helpers.acls import (
    ADMIN,
    AUTHORIZER_SETTINGS,
    acl_filter,
    allow,
    as_principal,
    create_acls,
    creation,
    delete_acls,
    deny,
    describe_acls,
    listed,
)
from tests.helpers.inprocess_broker import InProcessBroker
from tests.helpers.server_requests import create, fetch_body, produce_body, values

ALICE, BOB = "User:alice", "User:bob"


@pytest.fixture
def secured(tmp_path):
    """A broker with the authorizer on, topics t and u, its offsets topic ready."""
    b = InProcessBroker(
        tmp_path / "logs", **AUTHORIZER_SETTINGS, **{"offsets.topic.num.partitions": "1"}
    )
    with as_principal(b, ADMIN):
        create(b, "t")
        create(b, "u")
        g.ready(b)
    yield b
    b.close()


def produce_code(broker, topic: str = "t") -> int:
    answer = broker.call(PRODUCE, 8, produce_body(topic, values(b"x")))
    return answer["responses"][0]["partition_responses"][0]["error_code"]


def fetch_code(broker, topic: str = "t", replica_id: int = -1) -> int:
    body = {**fetch_body(topic, 0), "replica_id": replica_id}
    return broker.call(FETCH, 11, body)["responses"][0]["partitions"][0]["error_code"]


def metadata(broker, topics=None, version: int = 9, auto: bool = False, ops: bool = False):
    body = {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": auto,
        "include_cluster_authorized_operations": ops,
        "include_topic_authorized_operations": ops,
    }
    return broker.call(METADATA, version, body)


def bits(*ops: Op) -> int:
    return sum(1 << op for op in ops)


# -- the ACL APIs ---------------------------------------------------------------------------


def test_acl_apis_answer_security_disabled_without_an_authorizer(broker):
    assert broker.call(DESCRIBE_ACLS, 3, acl_filter())["error_code"] == E.SECURITY_DISABLED
    body = {"creations": [creation(ALICE, Op.READ, R.TOPIC, "t")]}
    (result,) = broker.call(CREATE_ACLS, 1, body)["results"]
    assert result["error_code"] == E.SECURITY_DISABLED


@pytest.mark.parametrize("version", [1, 2, 3])
def test_acls_are_created_described_deleted_and_kept_across_a_restart(tmp_path, version):
    b = InProcessBroker(tmp_path / "logs", **AUTHORIZER_SETTINGS)
    results = create_acls(
        b,
        creation(ALICE, Op.READ, R.TOPIC, "t"),
        creation(ALICE, Op.WRITE, R.TOPIC, "pre-", pattern=PatternType.PREFIXED),
        creation(BOB, Op.READ, R.GROUP, "g", permission=Permission.DENY, host="10.0.0.1"),
        creation(ALICE, Op.READ, R.TOPIC, "t"),  # already there: fine
        version=version,
    )
    assert [r["error_code"] for r in results] == [0, 0, 0, 0]
    everything = {
        (R.TOPIC, "t", PatternType.LITERAL, ALICE, "*", Op.READ, Permission.ALLOW),
        (R.TOPIC, "pre-", PatternType.PREFIXED, ALICE, "*", Op.WRITE, Permission.ALLOW),
        (R.GROUP, "g", PatternType.LITERAL, BOB, "10.0.0.1", Op.READ, Permission.DENY),
    }
    assert listed(describe_acls(b, version=version)) == everything
    assert listed(describe_acls(b, resource_type=R.GROUP)) == {
        a for a in everything if a[0] == R.GROUP
    }
    # MATCH: the patterns that apply to a topic named pre-x
    matching = describe_acls(b, resource_type=R.TOPIC, name="pre-x", pattern=PatternType.MATCH)
    assert {a[1] for a in listed(matching)} == {"pre-"}
    b.close()

    b = InProcessBroker(tmp_path / "logs", **AUTHORIZER_SETTINGS)  # the file store
    assert (tmp_path / "logs" / ACLS_FILE).exists()
    assert listed(describe_acls(b)) == everything
    (deleted,) = delete_acls(b, acl_filter(principal=ALICE), version=version)
    assert deleted["error_code"] == 0
    assert {(m["resource_name"], m["operation"]) for m in deleted["matching_acls"]} == {
        ("t", Op.READ), ("pre-", Op.WRITE)
    }  # fmt: skip
    assert {a[3] for a in listed(describe_acls(b))} == {BOB}
    b.close()


@pytest.mark.parametrize(
    "bad",
    [
        creation(ALICE, Op.READ, R.CLUSTER, "not-the-cluster"),
        creation(ALICE, Op.READ, R.TOPIC, "t", pattern=PatternType.MATCH),
        creation(ALICE, Op.ANY, R.TOPIC, "t"),
        creation(ALICE, Op.READ, R.ANY, "t"),
        creation("alice", Op.READ, R.TOPIC, "t"),
        creation(ALICE, Op.READ, R.TOPIC, "t", permission=Permission.ANY),
        {**creation(ALICE, Op.READ, R.TOPIC, "t"), "operation": 99},
    ],
)
def test_a_bad_acl_is_refused_with_a_reason_and_stops_no_other(secured, bad):
    bad_result, good = create_acls(secured, bad, creation(ALICE, Op.READ, R.TOPIC, "t"))
    assert bad_result["error_code"] == E.INVALID_REQUEST and bad_result["error_message"]
    assert good["error_code"] == 0
    assert len(listed(describe_acls(secured))) == 1


def test_acl_apis_need_describe_or_alter_on_the_cluster(secured):
    with as_principal(secured, ALICE):
        assert secured.call(DESCRIBE_ACLS, 3, acl_filter())["error_code"] == (
            E.CLUSTER_AUTHORIZATION_FAILED
        )
        body = {"creations": [creation(ALICE, Op.ALL, R.TOPIC, "*")]}
        (result,) = secured.call(CREATE_ACLS, 3, body)["results"]
        assert result["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED
    allow(secured, ALICE, Op.ALTER, R.CLUSTER, "kafka-cluster")
    with as_principal(secured, ALICE):  # ALTER implies DESCRIBE
        assert secured.call(DESCRIBE_ACLS, 3, acl_filter())["error_code"] == 0


# -- the rules ------------------------------------------------------------------------------


def test_no_acl_means_denied_and_an_allow_lets_the_principal_in(secured):
    with as_principal(secured, ALICE):
        assert produce_code(secured) == E.TOPIC_AUTHORIZATION_FAILED
    allow(secured, ALICE, Op.WRITE, R.TOPIC, "t")
    with as_principal(secured, ALICE):
        assert produce_code(secured) == 0
        assert produce_code(secured, "u") == E.TOPIC_AUTHORIZATION_FAILED
    with as_principal(secured, BOB):
        assert produce_code(secured) == E.TOPIC_AUTHORIZATION_FAILED


def test_deny_wins_over_allow(secured):
    allow(secured, "User:*", Op.ALL, R.TOPIC, "*")
    deny(secured, ALICE, Op.WRITE, R.TOPIC, "t")
    with as_principal(secured, ALICE):
        assert produce_code(secured) == E.TOPIC_AUTHORIZATION_FAILED
        assert produce_code(secured, "u") == 0
        assert fetch_code(secured) == 0  # only WRITE is denied
    with as_principal(secured, BOB):
        assert produce_code(secured) == 0


def test_prefixed_acls_apply_to_every_topic_with_the_prefix(secured):
    with as_principal(secured, ADMIN):
        create(secured, "sales-eu")
        create(secured, "sales-us")
    allow(secured, ALICE, Op.WRITE, R.TOPIC, "sales-", pattern=PatternType.PREFIXED)
    deny(secured, ALICE, Op.WRITE, R.TOPIC, "sales-us", pattern=PatternType.PREFIXED)
    with as_principal(secured, ALICE):
        assert produce_code(secured, "sales-eu") == 0
        assert produce_code(secured, "sales-us") == E.TOPIC_AUTHORIZATION_FAILED
        assert produce_code(secured, "t") == E.TOPIC_AUTHORIZATION_FAILED


def test_hosts_are_matched(secured):
    allow(secured, ALICE, Op.WRITE, R.TOPIC, "t", host="10.1.1.1")
    with as_principal(secured, ALICE, host="10.1.1.1"):
        assert produce_code(secured) == 0
    with as_principal(secured, ALICE, host="10.1.1.2"):
        assert produce_code(secured) == E.TOPIC_AUTHORIZATION_FAILED


def test_super_users_need_no_acl_and_no_deny_stops_them(secured):
    deny(secured, "User:*", Op.ALL, R.TOPIC, "*")
    with as_principal(secured, "User:broker"):
        assert produce_code(secured) == 0


def test_allow_everyone_if_no_acl_found(tmp_path):
    b = InProcessBroker(
        tmp_path / "logs", **{**AUTHORIZER_SETTINGS, "allow.everyone.if.no.acl.found": "true"}
    )
    with as_principal(b, ADMIN):
        create(b, "t")
        create(b, "u")
    with as_principal(b, ALICE):
        assert produce_code(b) == 0
    allow(b, BOB, Op.WRITE, R.TOPIC, "t")  # now t has an ACL, and it is not alice's
    with as_principal(b, ALICE):
        assert produce_code(b) == E.TOPIC_AUTHORIZATION_FAILED
        assert produce_code(b, "u") == 0
    b.close()


# -- per API --------------------------------------------------------------------------------


def test_fetch_needs_read_and_a_follower_cluster_action(secured):
    with as_principal(secured, ALICE):
        assert fetch_code(secured) == E.TOPIC_AUTHORIZATION_FAILED
    allow(secured, ALICE, Op.READ, R.TOPIC, "t")
    with as_principal(secured, ALICE):
        assert fetch_code(secured) == 0
        assert fetch_code(secured, replica_id=1) == E.TOPIC_AUTHORIZATION_FAILED
        both = {**fetch_body("t", 0), "replica_id": -1}
        both["topics"].append({**both["topics"][0], "topic": "u"})
        answer = secured.call(FETCH, 11, both)
        codes = {r["topic"]: r["partitions"][0]["error_code"] for r in answer["responses"]}
        assert codes == {"t": 0, "u": E.TOPIC_AUTHORIZATION_FAILED}
    allow(secured, "User:replica", Op.CLUSTER_ACTION, R.CLUSTER, "kafka-cluster")
    with as_principal(secured, "User:replica"):
        assert fetch_code(secured, replica_id=1) != E.TOPIC_AUTHORIZATION_FAILED


def test_metadata_hides_what_the_principal_may_not_describe(secured):
    allow(secured, ALICE, Op.READ, R.TOPIC, "t")  # READ implies DESCRIBE
    with as_principal(secured, ALICE):
        assert [t["name"] for t in metadata(secured)["topics"]] == ["t"]
        named = {t["name"]: t["error_code"] for t in metadata(secured, ["t", "u"])["topics"]}
        assert named == {"t": 0, "u": E.TOPIC_AUTHORIZATION_FAILED}
        v0 = secured.call(METADATA, 0, {"topics": []})["topics"]
        assert [t["name"] for t in v0] == ["t"]
        answer = metadata(secured, ["t"], ops=True)
        (topic,) = answer["topics"]
        assert topic["topic_authorized_operations"] == bits(Op.READ, Op.DESCRIBE)
        assert answer["cluster_authorized_operations"] == 0
    with as_principal(secured, ADMIN):
        assert "u" in {t["name"] for t in metadata(secured)["topics"]}


def test_metadata_auto_creation_needs_create(secured):
    allow(secured, ALICE, Op.DESCRIBE, R.TOPIC, "*")
    with as_principal(secured, ALICE):
        (topic,) = metadata(secured, ["new"], auto=True)["topics"]
        assert topic["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
    allow(secured, ALICE, Op.CREATE, R.TOPIC, "new")
    with as_principal(secured, ALICE):
        (topic,) = metadata(secured, ["new"], auto=True)["topics"]
        assert topic["error_code"] in (0, E.LEADER_NOT_AVAILABLE)


def test_list_offsets_and_offset_for_leader_epoch_need_describe(secured):
    def list_code():
        body = {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}],
        }  # fmt: skip
        return secured.call(LIST_OFFSETS, 7, body)["topics"][0]["partitions"][0]["error_code"]

    def epoch_code():
        body = {
            "replica_id": -1,
            "topics": [{"topic": "t", "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}],
        }  # fmt: skip
        answer = secured.call(OFFSET_FOR_LEADER_EPOCH, 3, body)
        return answer["topics"][0]["partitions"][0]["error_code"]

    with as_principal(secured, ALICE):
        assert (list_code(), epoch_code()) == (E.TOPIC_AUTHORIZATION_FAILED,) * 2
    allow(secured, ALICE, Op.DESCRIBE, R.TOPIC, "t")
    with as_principal(secured, ALICE):
        assert (list_code(), epoch_code()) == (0, 0)


def test_create_topics_needs_create_and_reveals_nothing(secured):
    with as_principal(secured, ALICE):
        assert create(secured, "new")["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
        # t exists: the refusal is the same, not TOPIC_ALREADY_EXISTS
        assert create(secured, "t")["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
    allow(secured, ALICE, Op.CREATE, R.CLUSTER, "kafka-cluster")
    with as_principal(secured, ALICE):
        assert create(secured, "new")["error_code"] == 0
        # may create, but may not describe t: still nothing about it
        assert create(secured, "t")["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
    allow(secured, BOB, Op.CREATE, R.TOPIC, "bob-", pattern=PatternType.PREFIXED)
    allow(secured, BOB, Op.DESCRIBE, R.TOPIC, "t")
    with as_principal(secured, BOB):
        assert create(secured, "bob-1")["error_code"] == 0
        assert create(secured, "other")["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
    allow(secured, BOB, Op.CREATE, R.TOPIC, "t")
    with as_principal(secured, BOB):
        assert create(secured, "t")["error_code"] == E.TOPIC_ALREADY_EXISTS


def test_delete_topics_and_create_partitions_need_delete_and_alter(secured):
    def delete_code(name):
        body = {"topic_names": [name], "timeout_ms": 1000}
        return secured.call(DELETE_TOPICS, 3, body)["responses"][0]["error_code"]

    def partitions_code(name):
        body = {"topics": [{"name": name, "count": 2, "assignments": None}],
                "timeout_ms": 1000, "validate_only": True}  # fmt: skip
        return secured.call(CREATE_PARTITIONS, 3, body)["results"][0]["error_code"]

    with as_principal(secured, ALICE):
        assert delete_code("u") == E.TOPIC_AUTHORIZATION_FAILED
        assert partitions_code("u") == E.TOPIC_AUTHORIZATION_FAILED
    allow(secured, ALICE, Op.DELETE, R.TOPIC, "u")
    allow(secured, ALICE, Op.ALTER, R.TOPIC, "t")
    with as_principal(secured, ALICE):
        assert partitions_code("t") == 0
        assert delete_code("u") == 0


def test_configs_need_describe_configs_and_alter_configs(secured):
    def describe_codes():
        body = {"resources": [
            {"resource_type": 2, "resource_name": "t", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "0", "configuration_keys": None},
        ], "include_synonyms": False, "include_documentation": False}  # fmt: skip
        return [r["error_code"] for r in secured.call(DESCRIBE_CONFIGS, 4, body)["results"]]

    def alter_codes():
        body = {"resources": [
            {"resource_type": 2, "resource_name": "t", "configs": []},
            {"resource_type": 4, "resource_name": "0", "configs": []},
        ], "validate_only": True}  # fmt: skip
        return [r["error_code"] for r in secured.call(ALTER_CONFIGS, 2, body)["responses"]]

    with as_principal(secured, ALICE):
        assert describe_codes() == [E.TOPIC_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED]
        assert alter_codes() == [E.TOPIC_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED]
    allow(secured, ALICE, Op.ALTER_CONFIGS, R.TOPIC, "t")  # implies DESCRIBE_CONFIGS
    allow(secured, ALICE, Op.DESCRIBE_CONFIGS, R.CLUSTER, "kafka-cluster")
    with as_principal(secured, ALICE):
        assert describe_codes() == [0, 0]
        assert alter_codes() == [0, E.CLUSTER_AUTHORIZATION_FAILED]


def test_init_producer_id_needs_idempotent_write_or_write_on_some_topic(secured):
    def init(transactional_id=None):
        body = {"transactional_id": transactional_id, "transaction_timeout_ms": 60000}
        return secured.call(INIT_PRODUCER_ID, 1, body)["error_code"]

    with as_principal(secured, ALICE):
        assert init() == E.CLUSTER_AUTHORIZATION_FAILED
        assert init("txn") == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    allow(secured, ALICE, Op.WRITE, R.TOPIC, "t")
    allow(secured, BOB, Op.IDEMPOTENT_WRITE, R.CLUSTER, "kafka-cluster")
    for principal in (ALICE, BOB):
        with as_principal(secured, principal):
            assert init() == 0
    deny(secured, ALICE, Op.WRITE, R.TOPIC, "t")
    with as_principal(secured, ALICE):
        assert init() == E.CLUSTER_AUTHORIZATION_FAILED


@pytest.mark.parametrize(
    ("api", "version", "body"),
    [
        (CONTROLLED_SHUTDOWN, 2, {"broker_id": 0, "broker_epoch": 1}),
        (STOP_REPLICA, 1, {"controller_id": 1, "controller_epoch": 1, "broker_epoch": 1,
                           "delete_partitions": False, "partitions": []}),
        (UPDATE_METADATA, 5, {"controller_id": 1, "controller_epoch": 1, "broker_epoch": 1,
                              "topic_states": [], "live_brokers": []}),
        (ELECT_LEADERS, 2, {"election_type": 0, "topic_partitions": None, "timeout_ms": 1000}),
        (DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": True}),
        (DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None}),
    ],
    ids=["ControlledShutdown", "StopReplica", "UpdateMetadata", "ElectLeaders",
         "DescribeCluster", "DescribeUserScramCredentials"],
)  # fmt: skip
def test_cluster_apis_need_their_cluster_operation(secured, api, version, body):
    with as_principal(secured, ALICE):
        answer = secured.call(api, version, body)
    assert answer["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED


def test_altering_scram_credentials_needs_alter_on_the_cluster(secured):
    body = {
        "deletions": [],
        "upsertions": [
            {"name": "mallory", "mechanism": 2, "iterations": 4096, "salt": b"s" * 16,
             "salted_password": b"p" * 64},
        ],
    }  # fmt: skip
    with as_principal(secured, ALICE):
        answer = secured.call(ALTER_USER_SCRAM_CREDENTIALS, 0, body)
    assert [r["error_code"] for r in answer["results"]] == [E.CLUSTER_AUTHORIZATION_FAILED]


def test_describe_cluster_reports_the_authorized_operations(secured):
    allow(secured, ALICE, Op.DESCRIBE, R.CLUSTER, "kafka-cluster")
    allow(secured, ALICE, Op.ALTER_CONFIGS, R.CLUSTER, "kafka-cluster")
    body = {"include_cluster_authorized_operations": True}
    with as_principal(secured, ALICE):
        answer = secured.call(DESCRIBE_CLUSTER, 0, body)
    assert answer["error_code"] == 0
    assert answer["cluster_authorized_operations"] == bits(
        Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS
    )


# -- groups ---------------------------------------------------------------------------------


def test_group_membership_needs_read_on_the_group(secured):
    with as_principal(secured, ALICE):
        assert g.find_coordinator(secured, "g")["error_code"] == E.GROUP_AUTHORIZATION_FAILED
        assert g.join(secured, "g").result()["error_code"] == E.GROUP_AUTHORIZATION_FAILED
        assert g.heartbeat(secured, "g", 1, "m") == E.GROUP_AUTHORIZATION_FAILED
        assert g.leave(secured, "g", "m") == E.GROUP_AUTHORIZATION_FAILED
        assert g.sync(secured, "g", 1, "m").result()["error_code"] == (E.GROUP_AUTHORIZATION_FAILED)
    allow(secured, ALICE, Op.READ, R.GROUP, "g")
    with as_principal(secured, ALICE):
        assert g.find_coordinator(secured, "g")["error_code"] == 0  # READ implies DESCRIBE
        assert g.join(secured, "g").result()["error_code"] == E.MEMBER_ID_REQUIRED


def test_offsets_need_the_group_and_the_topics(secured):
    offsets = {("t", 0): 5, ("u", 0): 7}
    with as_principal(secured, ALICE):
        assert set(g.commit_errors(g.commit(secured, "g", offsets)).values()) == {
            E.GROUP_AUTHORIZATION_FAILED
        }
        assert g.fetch_offsets(secured, "g")["error_code"] == E.GROUP_AUTHORIZATION_FAILED
    allow(secured, ALICE, Op.READ, R.GROUP, "g")
    allow(secured, ALICE, Op.READ, R.TOPIC, "t")
    with as_principal(secured, ALICE):
        assert g.commit_errors(g.commit(secured, "g", offsets)) == {
            ("t", 0): 0, ("u", 0): E.TOPIC_AUTHORIZATION_FAILED
        }  # fmt: skip
        fetched = g.fetch_offsets(secured, "g", [("t", 0), ("u", 0)])
        codes = {t["name"]: t["partitions"][0]["error_code"] for t in fetched["topics"]}
        assert codes == {"t": 0, "u": E.TOPIC_AUTHORIZATION_FAILED}
    with as_principal(secured, ADMIN):
        g.commit(secured, "g", {("u", 0): 9}).result()
    with as_principal(secured, ALICE):  # all offsets: u left out
        assert g.committed(secured, "g") == {("t", 0): 5}


def test_describe_list_and_delete_groups(secured):
    with as_principal(secured, ADMIN):
        g.commit(secured, "g", {("t", 0): 1}).result()
        g.commit(secured, "h", {("t", 0): 1}).result()
    allow(secured, ALICE, Op.DESCRIBE, R.GROUP, "g")
    with as_principal(secured, ALICE):
        assert g.describe(secured, "h")["error_code"] == E.GROUP_AUTHORIZATION_FAILED
        body = {"groups": ["g"], "include_authorized_operations": True}
        (described,) = secured.call(DESCRIBE_GROUPS, 5, body)["groups"]
        assert described["error_code"] == 0
        assert described["authorized_operations"] == bits(Op.DESCRIBE)
        assert [x["group_id"] for x in g.list_groups(secured)["groups"]] == ["g"]
        deleted = g.delete_groups(secured, "g").result()["results"]
        assert deleted[0]["error_code"] == E.GROUP_AUTHORIZATION_FAILED
    with as_principal(secured, ADMIN):
        assert {x["group_id"] for x in g.list_groups(secured)["groups"]} == {"g", "h"}
    allow(secured, ALICE, Op.DELETE, R.GROUP, "g")
    with as_principal(secured, ALICE):
        assert g.delete_groups(secured, "g").result()["results"][0]["error_code"] == 0
