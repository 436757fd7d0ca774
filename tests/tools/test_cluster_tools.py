"""kafka-topics, kafka-configs, kafka-reassign-partitions and kafka-leader-election against
three broker processes on ZooKeeper, their results checked with confluent-kafka's admin
client and consumer (and ZooKeeper's znodes for the throttle): topics created, described,
grown and deleted; configs set and deleted on topics, a broker and the broker default; a
partition moved under a throttle that --verify removes, with every record kept; bad plans
refused with nothing changed; leadership given back to preferred replicas; bad arguments
(exit 2). The filters of --describe and a preferred election after a broker returns need
brokers killed: `slow`, on a cluster of their own."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import ConfigResource as ConfluentResource

from broker.client.admin import AdminClient, ConfigResource, ConfigResourceType, NewTopic
from broker.processes import Cluster, kazoo_session
from broker.protocol.errors import ErrorCode
from broker.tools import configs, leader_election, reassign_partitions, topics
from tests.helpers.cluster import FAST_FAILOVER, fresh, in_sync, leaders, read_partition, wait_for

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    """Three brokers shared by the module (no broker is stopped here)."""
    overrides = {"auto.leader.rebalance.enable": "false"}  # elections only when asked
    with Cluster(
        tmp_path_factory.mktemp("cluster"), 3, zookeeper=zookeeper, overrides=overrides
    ) as c:
        yield c


@pytest.fixture(scope="module")
def confluent(cluster):
    return ConfluentAdmin({"bootstrap.servers": cluster.bootstrap})


@pytest.fixture
def run(cluster, capsys):
    """run(tool, *args) -> (exit code, stdout, stderr) of a tool against the cluster."""

    def call(tool, *args: str, bootstrap: str | None = None) -> tuple[int, str, str]:
        capsys.readouterr()
        code = tool.main(["--bootstrap-server", bootstrap or cluster.bootstrap, *args])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def described(out: str) -> dict:
    """kafka-topics --describe lines -> {"topics": {name: fields}, "partitions": {(t, p): fields}}."""
    found: dict = {"topics": {}, "partitions": {}}
    for line in out.splitlines():
        if not line.strip():
            continue
        fields = dict(f.split(": ", 1) for f in line.strip("\t").split("\t"))
        if line.startswith("\t"):
            found["partitions"][(fields["Topic"], int(fields["Partition"]))] = fields
        else:
            found["topics"][fields["Topic"]] = fields
    return found


def confluent_configs(confluent, kind: int, name: str) -> dict[str, str]:
    resource = ConfluentResource(kind, name)
    entries = confluent.describe_configs([resource])[resource].result(30)
    return {k: e.value for k, e in entries.items()}


def produce(bootstrap: str, topic: str, count: int) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    values = [f"v{i}".encode() for i in range(count)]
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0
    return values


# -- kafka-topics ---------------------------------------------------------------------------


def test_topics_create_describe_alter_delete(run, confluent):
    topic = fresh("tools")
    code, out, err = run(
        topics,
        "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "3",
        "--config", "retention.ms=3600000", "--config", "min.insync.replicas=2",
    )  # fmt: skip
    assert (code, out, err) == (0, f"Created topic {topic}.\n", "")
    md = wait_for(lambda: in_sync(confluent, topic, 3), "created topic in sync")
    assert sorted(md) == [0, 1]
    assert (
        confluent_configs(confluent, ConfluentResource.Type.TOPIC, topic)["retention.ms"]
        == "3600000"
    )

    code, out, _ = run(topics, "--describe", "--topic", topic)
    assert code == 0
    shown = described(out)
    head = shown["topics"][topic]
    assert head["PartitionCount"] == "2" and head["ReplicationFactor"] == "3"
    assert set(head["Configs"].split(",")) == {"retention.ms=3600000", "min.insync.replicas=2"}
    for p, (leader, replicas, isr) in md.items():
        line = shown["partitions"][(topic, p)]
        assert line["Leader"] == str(leader)
        assert line["Replicas"] == ",".join(map(str, replicas))
        assert sorted(line["Isr"].split(",")) == sorted(map(str, isr))
    assert out.splitlines()[1].startswith(f"\tTopic: {topic}\tPartition: 0\tLeader: ")

    code, _, err = run(topics, "--create", "--topic", topic, "--partitions", "1")
    assert code == 1 and err == f"Error: Topic '{topic}' already exists.\n"
    assert run(topics, "--create", "--topic", topic, "--if-not-exists")[:2] == (0, "")

    assert run(topics, "--alter", "--topic", topic, "--partitions", "4")[0] == 0
    grown = wait_for(lambda: in_sync(confluent, topic, 3), "grown topic in sync")
    assert sorted(grown) == [0, 1, 2, 3]
    code, _, err = run(topics, "--alter", "--topic", topic, "--partitions", "3")
    assert code == 1 and "Topic currently has 4 partitions" in err

    code, out, _ = run(topics, "--list")
    assert code == 0 and topic in out.split()
    assert run(topics, "--delete", "--topic", topic)[0] == 0
    wait_for(lambda: topic not in confluent.list_topics(timeout=10).topics, "topic deleted")
    code, _, err = run(topics, "--describe", "--topic", topic)
    assert code == 1 and err == f"Error: Topic '{topic}' does not exist as expected\n"
    assert run(topics, "--delete", "--topic", topic, "--if-exists")[:2] == (0, "")


def test_topics_replica_assignment(run, confluent):
    topic = fresh("assigned")
    code, _, _ = run(topics, "--create", "--topic", topic, "--replica-assignment", "2:0,0:1")
    assert code == 0
    md = wait_for(lambda: in_sync(confluent, topic, 2), "assigned topic in sync")
    assert {p: r for p, (_, r, _) in md.items()} == {0: [2, 0], 1: [0, 1]}
    # --alter with the whole topic's assignment: the entries past the current ones are new.
    assert run(topics, "--alter", "--topic", topic, "--replica-assignment", "2:0,0:1,1:2")[0] == 0
    md = wait_for(lambda: (m := in_sync(confluent, topic, 2)) and len(m) == 3 and m, "grown")
    assert md[2][1] == [1, 2]


@pytest.mark.parametrize(
    "tool, args, problem",
    [
        (topics, [], "exactly one action"),
        (topics, ["--list", "--describe"], "exactly one action"),
        (topics, ["--create", "--partitions", "1"], "--create needs --topic"),
        (topics, ["--create", "--topic", "bad/name"], "--topic 'bad/name'"),
        (topics, ["--create", "--topic", "t", "--partitions", "0"], "not a positive integer"),
        (topics, ["--create", "--topic", "t", "--replica-assignment", "1:1"], "duplicate replica"),
        (topics, ["--create", "--topic", "t", "--replica-assignment", "1:2,1"], "same replication"),
        (topics, ["--create", "--topic", "t", "--config", "novalue"], "is not KEY=VALUE"),
        (topics, ["--alter", "--topic", "t"], "--alter needs --partitions"),
        (topics, ["--list", "--under-replicated-partitions"], "--list takes no"),
        (
            topics,
            ["--describe", "--unavailable-partitions", "--at-min-isr-partitions"],
            "at most one",
        ),
        (topics, ["--describe", "--topic", "a["], "not a regular expression"),
        (configs, ["--entity-type", "topics", "--describe", "--alter"], "exactly one action"),
        (configs, ["--entity-type", "topics", "--alter", "--entity-name", "t"], "--add-config"),
        (configs, ["--entity-type", "brokers", "--describe", "--entity-name", "x"], "broker id"),
        (configs, ["--entity-type", "topics", "--entity-default", "--describe"], "brokers"),
        (
            configs,
            ["--entity-type", "topics", "--alter", "--entity-name", "t", "--add-config", "a=[1"],
            "without ']'",
        ),
        (leader_election, ["--election-type", "sideways", "--all-topic-partitions"], "PREFERRED"),
        (leader_election, ["--election-type", "preferred"], "exactly one of"),
        (leader_election, ["--election-type", "preferred", "--topic", "t"], "go together"),
        (reassign_partitions, ["--generate", "--broker-list", "1,2"], "--generate needs"),
        (reassign_partitions, ["--execute"], "needs --reassignment-json-file"),
        (reassign_partitions, ["--list", "--throttle", "5"], "takes no --throttle"),
        (reassign_partitions, ["--verify", "--broker-list", "1,1"], "duplicate broker ids"),
    ],
)
def test_bad_arguments_exit_2(run, capsys, tool, args, problem):
    with pytest.raises(SystemExit) as exit_:
        run(tool, *args)
    assert exit_.value.code == 2
    assert problem in capsys.readouterr().err


# -- kafka-configs --------------------------------------------------------------------------


def test_configs_topic_alter_describe_delete(run, confluent, cluster):
    topic = fresh("configs")
    run(topics, "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
    code, out, _ = run(
        configs, "--alter", "--entity-type", "topics", "--entity-name", topic,
        "--add-config", "retention.ms=60000,cleanup.policy=[compact,delete]",
    )  # fmt: skip
    assert (code, out) == (0, f"Completed updating config for topic {topic}.\n")
    seen = confluent_configs(confluent, ConfluentResource.Type.TOPIC, topic)
    assert seen["retention.ms"] == "60000" and seen["cleanup.policy"] == "compact,delete"

    code, out, _ = run(configs, "--describe", "--entity-type", "topics", "--entity-name", topic)
    lines = out.splitlines()
    assert lines[0] == f"Dynamic configs for topic {topic} are:"
    assert (
        "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000, "
        "DEFAULT_CONFIG:log.retention.hours=168}"
    ) in lines
    assert len(lines) == 3  # only what is set on the topic
    code, out, _ = run(
        configs, "--describe", "--entity-type", "topics", "--entity-name", topic, "--all"
    )
    assert out.splitlines()[0] == f"All configs for topic {topic} are:"
    assert any(line.startswith("  segment.bytes=") for line in out.splitlines())

    code, _, _ = run(
        configs, "--alter", "--entity-type", "topics", "--entity-name", topic,
        "--delete-config", "retention.ms",
    )  # fmt: skip
    assert code == 0
    seen = confluent_configs(confluent, ConfluentResource.Type.TOPIC, topic)
    assert seen["retention.ms"] == "604800000"  # the default again
    assert seen["cleanup.policy"] == "compact,delete"

    code, _, err = run(
        configs, "--alter", "--entity-type", "topics", "--entity-name", topic,
        "--delete-config", "retention.ms",
    )  # fmt: skip
    assert (code, err) == (1, "Error: Invalid config(s): retention.ms\n")
    code, _, err = run(
        configs, "--alter", "--entity-type", "topics", "--entity-name", topic,
        "--add-config", "retention.ms=soon",
    )  # fmt: skip
    assert code == 1 and "retention.ms" in err and "soon" in err
    code, _, err = run(
        configs, "--describe", "--entity-type", "topics", "--entity-name", fresh("none")
    )
    assert code == 1 and "does not exist" in err


def test_configs_broker_and_default(run, confluent):
    code, out, _ = run(
        configs, "--alter", "--entity-type", "brokers", "--entity-name", "1",
        "--add-config", "log.retention.ms=7200000",
    )  # fmt: skip
    assert (code, out) == (0, "Completed updating config for broker 1.\n")
    code, out, _ = run(
        configs, "--alter", "--entity-type", "brokers", "--entity-default",
        "--add-config", "log.retention.ms=3600000",
    )  # fmt: skip
    assert (code, out) == (0, "Completed updating default config for brokers in the cluster.\n")
    try:
        assert (
            confluent_configs(confluent, ConfluentResource.Type.BROKER, "1")["log.retention.ms"]
            == "7200000"
        )
        # The other brokers apply the default when ZooKeeper tells them (/config/changes).
        wait_for(
            lambda: (
                confluent_configs(confluent, ConfluentResource.Type.BROKER, "2")["log.retention.ms"]
                == "3600000"
            ),
            "broker 2 applies the default",
        )
        wait_for(
            lambda: (
                "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000"
                in run(configs, "--describe", "--entity-type", "brokers", "--entity-name", "1")[1]
            ),
            "broker 1 applies the default",
        )
        code, out, _ = run(configs, "--describe", "--entity-type", "brokers", "--entity-name", "1")
        assert out.splitlines() == [
            "Dynamic configs for broker 1 are:",
            "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
            "log.retention.ms=7200000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, "
            "DEFAULT_CONFIG:log.retention.hours=168}",
        ]
        code, out, _ = run(configs, "--describe", "--entity-type", "brokers", "--entity-default")
        assert out.splitlines()[0] == "Default configs for brokers in the cluster are:"
        assert out.splitlines()[1].startswith("  log.retention.ms=3600000 ")
    finally:
        for target in (["--entity-name", "1"], ["--entity-default"]):
            run(configs, "--alter", "--entity-type", "brokers", *target,
                "--delete-config", "log.retention.ms")  # fmt: skip
    assert "log.retention.ms=" not in run(configs, "--describe", "--entity-type", "brokers")[1]


# -- kafka-reassign-partitions --------------------------------------------------------------


def write_json(tmp_path, name: str, data) -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def zk_config(cluster, topic: str) -> dict[str, str]:
    with kazoo_session(cluster.zookeeper_connect) as zk:
        return json.loads(zk.get(f"/config/topics/{topic}")[0])["config"]


def zk_broker_config(cluster, broker: int) -> dict[str, str]:
    with kazoo_session(cluster.zookeeper_connect) as zk:
        if not zk.exists(f"/config/brokers/{broker}"):
            return {}
        return json.loads(zk.get(f"/config/brokers/{broker}")[0])["config"]


def test_reassign_generate_execute_throttle_verify(run, confluent, cluster, tmp_path):
    topic = fresh("move")
    run(topics, "--create", "--topic", topic, "--replica-assignment", "0:1")
    wait_for(lambda: in_sync(confluent, topic, 2), "topic in sync")
    values = produce(cluster.bootstrap, topic, 200)

    topics_file = write_json(tmp_path, "topics.json", {"version": 1, "topics": [{"topic": topic}]})
    code, out, _ = run(
        reassign_partitions, "--generate", "--topics-to-move-json-file", topics_file,
        "--broker-list", "1,2",
    )  # fmt: skip
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[1]) == {
        "version": 1,
        "partitions": [
            {"topic": topic, "partition": 0, "replicas": [0, 1], "log_dirs": ["any", "any"]}
        ],
    }
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])["partitions"][0]
    assert sorted(proposed["replicas"]) == [1, 2]

    plan = write_json(tmp_path, "plan.json", {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 1], "log_dirs": ["any", "any"]}
    ]})  # fmt: skip
    code, out, err = run(
        reassign_partitions, "--execute", "--reassignment-json-file", plan, "--throttle", "50000"
    )
    assert (code, err) == (0, "")
    assert "Save this to use as the --reassignment-json-file option during rollback" in out
    assert f"Successfully started partition reassignments for {topic}-0" in out
    assert "The inter-broker throttle limit was set to 50000 B/s" in out
    # Kafka's throttle: the current replicas lead, the added one follows, rates on all three.
    stored = zk_config(cluster, topic)
    assert stored["leader.replication.throttled.replicas"] == "0:0,0:1"
    assert stored["follower.replication.throttled.replicas"] == "0:2"
    for broker in (0, 1, 2):
        rates = zk_broker_config(cluster, broker)
        assert rates["leader.replication.throttled.rate"] == "50000"
        assert rates["follower.replication.throttled.rate"] == "50000"

    def verified():
        code, out, _ = run(reassign_partitions, "--verify", "--reassignment-json-file", plan)
        assert code == 0
        return out if f"Reassignment of partition {topic}-0 is completed." in out else None

    out = wait_for(verified, "reassignment verified complete")
    assert "Clearing broker-level throttles on brokers 0,1,2" in out
    assert f"Clearing topic-level throttles on topic {topic}" in out
    stored = zk_config(cluster, topic)
    assert "leader.replication.throttled.replicas" not in stored
    assert "follower.replication.throttled.replicas" not in stored
    for broker in (0, 1, 2):
        assert "leader.replication.throttled.rate" not in zk_broker_config(cluster, broker)
    md = wait_for(lambda: in_sync(confluent, topic, 2), "moved topic in sync")
    assert md[0][1] == [2, 1]
    assert read_partition(cluster.bootstrap, topic) == values
    assert run(reassign_partitions, "--list")[1] == "No partition reassignments found.\n"


BAD_PLANS = [
    # (plan, exit code, what the message says)
    ("{not json", 2, "is not JSON"),
    ({"version": 1, "partitions": []}, 2, "cannot be empty"),
    ({"version": 1, "partitions": [{"topic": "T", "partition": 0, "replicas": [1, 1]}]}, 2,
     "duplicate replicas"),
    ({"version": 1, "partitions": [{"topic": "T", "partition": 0, "replicas": []}]}, 2,
     "has no replicas"),
    ({"version": 1, "partitions": [{"topic": "T", "partition": 0, "replicas": [1, 2]},
                                   {"topic": "T", "partition": 0, "replicas": [2, 1]}]}, 2,
     "listed twice"),
    ({"version": 1, "partitions": [{"topic": "T", "partition": 0, "replicas": [1, 7]}]}, 1,
     "non-existent brokerIDs: 7"),
    ({"version": 1, "partitions": [{"topic": "T", "partition": 5, "replicas": [1, 2]}]}, 1,
     "Unable to find partition(s): T-5"),
    ({"version": 1, "partitions": [{"topic": "nosuch", "partition": 0, "replicas": [1, 2]}]}, 1,
     "Topic(s) not found: nosuch"),
]  # fmt: skip


def test_reassign_bad_plans_change_nothing(run, confluent, tmp_path):
    topic = fresh("badplan")
    run(topics, "--create", "--topic", topic, "--replica-assignment", "0:1")
    before = wait_for(lambda: in_sync(confluent, topic, 2), "topic in sync")
    for i, (plan, expected, problem) in enumerate(BAD_PLANS):
        if not isinstance(plan, str):
            plan = json.dumps(plan).replace('"T"', json.dumps(topic))
        path = write_json(tmp_path, f"plan{i}.json", plan)
        try:
            code, _, err = run(reassign_partitions, "--execute", "--reassignment-json-file", path)
        except SystemExit as exit_:
            code, err = exit_.code, ""
        assert code == expected, (plan, code)
        if expected == 1:
            assert problem.replace("T-", f"{topic}-") in err, (plan, err)
    # More replicas than brokers (four distinct registered ids do not exist: 3 brokers).
    path = write_json(tmp_path, "rf.json", {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [0, 1, 2, 3]}]})  # fmt: skip
    code, _, err = run(reassign_partitions, "--execute", "--reassignment-json-file", path)
    assert code == 1 and "non-existent brokerIDs: 3" in err
    # Generate: a replication factor above the brokers listed.
    topics_file = write_json(tmp_path, "t.json", {"version": 1, "topics": [{"topic": topic}]})
    code, _, err = run(
        reassign_partitions, "--generate", "--topics-to-move-json-file", topics_file,
        "--broker-list", "2",
    )  # fmt: skip
    assert code == 1 and "replication factor: 2 larger than available brokers: 1" in err
    code, _, err = run(
        reassign_partitions, "--generate", "--topics-to-move-json-file", topics_file,
        "--broker-list", "1,9",
    )  # fmt: skip
    assert code == 1 and "Unknown broker id(s): 9" in err
    # Nothing moved, nothing throttled, nothing under way.
    assert leaders(confluent, topic) == before
    assert run(reassign_partitions, "--list")[1] == "No partition reassignments found.\n"


def test_bad_plan_messages(run, capsys, tmp_path):
    """The malformed files' messages (argparse's usage error, exit 2)."""
    for i, (plan, expected, problem) in enumerate(BAD_PLANS):
        if expected != 2:
            continue
        text = plan if isinstance(plan, str) else json.dumps(plan)
        path = write_json(tmp_path, f"p{i}.json", text)
        with pytest.raises(SystemExit):
            run(reassign_partitions, "--verify", "--reassignment-json-file", path)
        assert problem in capsys.readouterr().err


# -- kafka-leader-election ------------------------------------------------------------------


def test_preferred_election_gives_leadership_back(run, confluent, tmp_path):
    topic = fresh("elect")
    run(topics, "--create", "--topic", topic, "--replica-assignment", "0:1,1:2")
    wait_for(lambda: in_sync(confluent, topic, 2), "topic in sync")
    # Reorder partition 0's replicas: its leader (0) stays, the preferred one is now 1.
    plan = write_json(tmp_path, "swap.json", {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1, 0]}]})  # fmt: skip
    assert run(reassign_partitions, "--execute", "--reassignment-json-file", plan)[0] == 0
    md = wait_for(
        lambda: (m := leaders(confluent, topic)) and m[0][1] == [1, 0] and m, "replicas reordered"
    )
    assert md[0][0] == 0

    code, out, err = run(
        leader_election, "--election-type", "PREFERRED", "--topic", topic, "--partition", "0"
    )
    assert (code, err) == (0, "")
    assert out == f"Successfully completed leader election (PREFERRED) for partitions {topic}-0\n"
    wait_for(lambda: leaders(confluent, topic)[0][0] == 1, "preferred leader back")

    elect_file = write_json(tmp_path, "elect.json", {"partitions": [
        {"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}]})  # fmt: skip
    code, out, _ = run(
        leader_election, "--election-type", "preferred", "--path-to-json-file", elect_file
    )
    assert code == 0
    assert out == f"Valid replica already elected for partitions {topic}-0, {topic}-1\n"

    code, out, err = run(
        leader_election, "--election-type", "PREFERRED", "--topic", topic, "--partition", "9"
    )
    assert code == 1
    assert f"Error completing leader election (PREFERRED) for partition: {topic}-9: " in out
    assert "UNKNOWN_TOPIC_OR_PARTITION" in out
    assert err == "Error: 1 replica(s) could not be elected\n"


# -- what needs brokers killed --------------------------------------------------------------


@pytest.mark.slow
def test_describe_filters_and_preferred_election_after_a_broker_returns(cluster_factory, capsys):
    c = cluster_factory(3, overrides={**FAST_FAILOVER, "auto.leader.rebalance.enable": "false"})
    admin = ConfluentAdmin({"bootstrap.servers": c.bootstrap})

    def run(tool, *args):
        capsys.readouterr()
        code = tool.main(["--bootstrap-server", c.bootstrap, *args])
        out, err = capsys.readouterr()
        return code, out, err

    run(topics, "--create", "--topic", "spread", "--replica-assignment", "2:0,0:1,1:2",
        "--config", "min.insync.replicas=2")  # fmt: skip
    run(topics, "--create", "--topic", "single", "--replica-assignment", "2")
    wait_for(lambda: in_sync(admin, "spread", 2), "spread in sync")
    assert run(topics, "--describe", "--under-replicated-partitions")[1] == ""

    c.kill(2)
    wait_for(
        lambda: (m := leaders(admin, "spread")) and all(2 not in m[p][2] for p in (0, 2)),
        "broker 2 out of the ISRs",
    )
    code, out, _ = run(topics, "--describe", "--under-replicated-partitions")
    assert code == 0
    # `single` keeps its last replica in its ISR while it has no leader (as Kafka).
    assert set(described(out)["partitions"]) == {("spread", 0), ("spread", 2)}
    code, out, _ = run(topics, "--describe", "--unavailable-partitions")
    assert set(described(out)["partitions"]) == {("single", 0)}
    assert described(out)["partitions"][("single", 0)]["Leader"] == "none"
    code, out, _ = run(topics, "--describe", "--under-min-isr-partitions", "--topic", "spread")
    assert set(described(out)["partitions"]) == {("spread", 0), ("spread", 2)}
    code, out, _ = run(topics, "--describe", "--at-min-isr-partitions", "--topic", "spread")
    assert set(described(out)["partitions"]) == {("spread", 1)}
    # Partition 0 (preferred 2) is led by 0 now; its preferred replica is not alive.
    code, out, _ = run(leader_election, "--election-type", "PREFERRED", "--topic", "spread",
                       "--partition", "0")  # fmt: skip
    assert code == 1 and "PREFERRED_LEADER_NOT_AVAILABLE" in out

    c.restart(2)
    wait_for(lambda: in_sync(admin, "spread", 2), "broker 2 back in the ISR")
    assert leaders(admin, "spread")[0][0] == 0  # no automatic rebalance here
    code, out, _ = run(leader_election, "--election-type", "PREFERRED", "--all-topic-partitions")
    assert code == 0
    # Only spread-0 lost its preferred leader (2); the others need no election.
    assert out == "Successfully completed leader election (PREFERRED) for partitions spread-0\n"
    md = wait_for(
        lambda: (m := leaders(admin, "spread")) and all(m[p][0] == m[p][1][0] for p in m) and m,
        "preferred leaders everywhere",
    )
    assert {p: leader for p, (leader, _, _) in md.items()} == {0: 2, 1: 0, 2: 1}
    assert run(topics, "--describe", "--under-replicated-partitions")[1] == ""


def test_admin_client_cluster_calls(cluster):
    """The AdminClient's own answers where the tools print less: the cluster, log dirs, a
    whole-set AlterConfigs, and CreatePartitions refused."""
    with AdminClient(cluster.bootstrap) as admin:
        described_cluster = admin.describe_cluster()
        assert [b.node_id for b in described_cluster.brokers] == [0, 1, 2]
        assert described_cluster.controller_id in (0, 1, 2)
        topic = fresh("admin")
        admin.create_topics([NewTopic(topic, 1, replica_assignment={0: [1, 2]})], raise_errors=True)
        values = produce(cluster.bootstrap, topic, 10)
        dirs = wait_for(
            lambda: (
                (d := admin.describe_log_dirs([1, 2], [(topic, 0)]))
                and all(
                    r.size > 0
                    for b in d.values()
                    for ld in b.values()
                    for r in ld.replicas.values()
                )
                and d
            ),
            "replicas with data",
        )
        for broker in (1, 2):
            ((_, log_dir),) = dirs[broker].items()
            assert set(log_dir.replicas) == {(topic, 0)} and log_dir.total_bytes > 0
        assert len(values) == 10
        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        assert admin.alter_configs({resource: {"retention.ms": "1000"}}) == {resource: 0}
        entries = {e.name: e for e in admin.describe_configs([resource])[resource]}
        assert entries["retention.ms"].value == "1000"
        assert entries["retention.ms"].source.name == "DYNAMIC_TOPIC_CONFIG"
        assert admin.create_partitions({topic: 1}) == {topic: ErrorCode.INVALID_PARTITIONS}
        assert "currently has 1 partitions" in admin.last_errors[topic][1]


def test_configs_describe_shows_throttled_replicas(run, cluster):
    topic = fresh("throttled")
    run(topics, "--create", "--topic", topic, "--replica-assignment", "0:1")
    run(configs, "--alter", "--entity-type", "topics", "--entity-name", topic,
        "--add-config", "leader.replication.throttled.replicas=0:0")  # fmt: skip
    out = run(configs, "--describe", "--entity-type", "topics", "--entity-name", topic)[1]
    assert "  leader.replication.throttled.replicas=0:0 sensitive=false" in out
