"""ACLs against principals that authenticate: a broker with a SASL_PLAINTEXT listener
(PLAIN users alice and bob) and the authorizer on; its PLAINTEXT listener's clients
(User:ANONYMOUS) are the super user that makes the ACLs. Real clients logged in as alice
produce and consume in a group as her ACLs allow; bob, with no ACL, is refused with
Kafka's errors; a DENY takes alice's write away again."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from kafka import KafkaProducer
from kafka import errors as kafka_errors

from broker.client.admin import AdminClient, NewTopic
from broker.processes import BrokerProcess, free_port
from broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from tests.helpers.acls import authorizer_settings

PASSWORDS = {"alice": "alice-pw-1", "bob": "bob-pw-2"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items())
    + ";"
)


@pytest.fixture
def sasl_broker(tmp_path):
    plain, sasl = free_port(), free_port()
    process = BrokerProcess(
        tmp_path / "logs",
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "sasl.enabled.mechanisms": "PLAIN",
            "group.initial.rebalance.delay.ms": "0",
            **authorizer_settings("User:ANONYMOUS"),
        },
        port=plain,
    )
    with process:
        yield process, f"127.0.0.1:{sasl}"


def sasl(user: str) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": PASSWORDS[user]}  # fmt: skip


def grant(admin: AdminClient, principal: str, op: Operation, kind: ResourceType, name: str,
          permission: Permission = Permission.ALLOW) -> None:  # fmt: skip
    binding = AclBinding(
        ResourcePattern(kind, name), AccessControlEntry(principal, "*", op, permission)
    )
    assert admin.create_acls([binding]) == {binding: 0}


def produce(bootstrap: str, user: str, topic: str) -> KafkaError | None:
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000, **sasl(user)})
    outcome: list = []
    producer.produce(
        topic, b"from-" + user.encode(), on_delivery=lambda err, msg: outcome.append(err)
    )
    producer.flush(30)
    assert outcome, "no delivery report"
    return outcome[0]


def consume(bootstrap: str, user: str, topic: str, group: str):
    """(values read, error codes seen) of a group member logged in as `user`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", **sasl(user)})  # fmt: skip
    consumer.subscribe([topic])
    values, errors = [], set()
    deadline = time.monotonic() + 30
    try:
        while not values and not errors and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                errors.add(msg.error().code())
            else:
                values.append(msg.value())
    finally:
        consumer.close()
    return values, errors


def test_authenticated_principals_get_what_their_acls_allow(sasl_broker):
    process, bootstrap = sasl_broker
    topic, group = f"orders-{uuid.uuid4().hex[:6]}", "billing"
    with AdminClient(process.bootstrap) as admin:  # PLAINTEXT: User:ANONYMOUS, super user
        admin.create_topics([NewTopic(topic, 1, 1)], raise_errors=True)
        for op in (Operation.WRITE, Operation.READ):
            grant(admin, "User:alice", op, ResourceType.TOPIC, topic)
        grant(admin, "User:alice", Operation.READ, ResourceType.GROUP, group)

    assert produce(bootstrap, "alice", topic) is None
    refused = produce(bootstrap, "bob", topic)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    assert consume(bootstrap, "alice", topic, group) == ([b"from-alice"], set())
    values, errors = consume(bootstrap, "bob", topic, group)
    assert values == [] and errors & {
        KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED
    }  # fmt: skip

    # kafka-python logged in as bob: its send fails the same way
    producer = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="bob",
                             sasl_plain_password=PASSWORDS["bob"], max_block_ms=10000)  # fmt: skip
    try:
        with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
            producer.send(topic, b"x").get(timeout=15)
    finally:
        producer.close(timeout=5)

    with AdminClient(process.bootstrap) as admin:  # deny wins over alice's allow
        grant(admin, "User:alice", Operation.WRITE, ResourceType.TOPIC, topic, Permission.DENY)
    refused = produce(bootstrap, "alice", topic)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_topic_administration_follows_prefixed_acls(sasl_broker):
    """confluent-kafka's admin client logged in as alice: creating and deleting topics is
    refused without an ACL, allowed under the prefix a PREFIXED ACL names, and still
    refused outside it."""
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from confluent_kafka.admin import NewTopic as ConfluentTopic

    process, bootstrap = sasl_broker
    alice = ConfluentAdmin({"bootstrap.servers": bootstrap, **sasl("alice")})
    prefix = f"team-a-{uuid.uuid4().hex[:6]}-"

    def create(name: str) -> int:
        future = alice.create_topics([ConfluentTopic(name, 1, 1)])[name]
        try:
            future.result(30)
            return 0
        except Exception as exc:  # KafkaException carrying the broker's error
            return exc.args[0].code()

    def delete(name: str) -> int:
        future = alice.delete_topics([name])[name]
        try:
            future.result(30)
            return 0
        except Exception as exc:
            return exc.args[0].code()

    assert create(prefix + "orders") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with AdminClient(process.bootstrap) as admin:  # User:ANONYMOUS, the super user
        for op in (Operation.CREATE, Operation.DELETE):
            binding = AclBinding(
                ResourcePattern(ResourceType.TOPIC, prefix, PatternType.PREFIXED),
                AccessControlEntry("User:alice", "*", op, Permission.ALLOW),
            )
            assert admin.create_acls([binding]) == {binding: 0}
        admin.create_topics([NewTopic("elsewhere", 1, 1)])
    assert create(prefix + "orders") == 0
    assert create("elsewhere-" + prefix) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert delete("elsewhere") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert delete(prefix + "orders") == 0
