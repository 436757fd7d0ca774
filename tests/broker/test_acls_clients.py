"""ACLs with real clients against a broker process: kafka-python's and confluent-kafka's
admin clients (and ours) create, list and delete ACLs; the ACLs then refuse a real
producer and consumer. Over PLAINTEXT every client is User:ANONYMOUS: the brokers here
either make it a super user (the admin tests) or allow everyone where no ACL applies,
and the ACL made denies it (the refusals)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka import admin as confluent_admin
from kafka import errors as kafka_errors
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

from broker.client.admin import AdminClient
from broker.client.connection import BrokerConnection
from broker.protocol.apis import FETCH
from broker.protocol.errors import ErrorCode
from broker.security import acl as ours
from tests.helpers.server_requests import fetch_body

ANONYMOUS = "User:ANONYMOUS"


@pytest.fixture
def admin_broker(acl_broker_factory):
    return acl_broker_factory(super_users=ANONYMOUS)


def test_kafka_python_creates_lists_and_deletes_acls(admin_broker):
    admin = KafkaAdminClient(bootstrap_servers=admin_broker.bootstrap)
    try:
        literal = ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                      ResourcePattern(ResourceType.TOPIC, "t"))  # fmt: skip
        prefixed = ACL("User:bob", "10.0.0.1", ACLOperation.WRITE, ACLPermissionType.DENY,
                       ResourcePattern(ResourceType.TOPIC, "sales-",
                                       ACLResourcePatternType.PREFIXED))  # fmt: skip
        group = ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                    ResourcePattern(ResourceType.GROUP, "g"))  # fmt: skip
        created = admin.create_acls([literal, prefixed, group])
        assert created["failed"] == [] and len(created["succeeded"]) == 3

        every = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                          ResourcePatternFilter(ResourceType.ANY, None,
                                                ACLResourcePatternType.ANY))  # fmt: skip
        found, error = admin.describe_acls(every)
        assert error is kafka_errors.NoError
        assert set(found) == {literal, prefixed, group}
        topics = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                           ResourcePatternFilter(ResourceType.TOPIC, "sales-eu",
                                                 ACLResourcePatternType.MATCH))  # fmt: skip
        assert admin.describe_acls(topics)[0] == [prefixed]

        alice = ACLFilter("User:alice", None, ACLOperation.ANY, ACLPermissionType.ANY,
                          ResourcePatternFilter(ResourceType.ANY, None,
                                                ACLResourcePatternType.ANY))  # fmt: skip
        ((_, deleted, error),) = admin.delete_acls([alice])
        assert error is kafka_errors.NoError and set(deleted) == {literal, group}
        assert admin.describe_acls(every)[0] == [prefixed]
    finally:
        admin.close()


def test_confluent_creates_lists_and_deletes_acls(admin_broker):
    c = confluent_admin
    admin = c.AdminClient({"bootstrap.servers": admin_broker.bootstrap})
    literal = c.AclBinding(c.ResourceType.TOPIC, "t", c.ResourcePatternType.LITERAL,
                           "User:alice", "*", c.AclOperation.READ,
                           c.AclPermissionType.ALLOW)  # fmt: skip
    prefixed = c.AclBinding(c.ResourceType.GROUP, "app-", c.ResourcePatternType.PREFIXED,
                            "User:bob", "*", c.AclOperation.DESCRIBE,
                            c.AclPermissionType.DENY)  # fmt: skip
    for future in admin.create_acls([literal, prefixed], request_timeout=30).values():
        assert future.result() is None
    every = c.AclBindingFilter(c.ResourceType.ANY, None, c.ResourcePatternType.ANY, None, None,
                               c.AclOperation.ANY, c.AclPermissionType.ANY)  # fmt: skip
    assert set(admin.describe_acls(every, request_timeout=30).result()) == {literal, prefixed}
    groups = c.AclBindingFilter(c.ResourceType.GROUP, None, c.ResourcePatternType.ANY, None,
                                None, c.AclOperation.ANY, c.AclPermissionType.ANY)  # fmt: skip
    deleted = admin.delete_acls([groups], request_timeout=30)[groups].result()
    assert deleted == [prefixed]
    assert admin.describe_acls(every, request_timeout=30).result() == [literal]


def test_our_admin_client_and_a_broker_without_authorizer(admin_broker, broker):
    binding = ours.AclBinding(
        ours.ResourcePattern(ours.ResourceType.CLUSTER, ours.CLUSTER_NAME),
        ours.AccessControlEntry("User:ops", "*", ours.Operation.ALTER, ours.Permission.ALLOW),
    )
    with AdminClient(admin_broker.bootstrap) as admin:
        assert admin.create_acls([binding]) == {binding: 0}
        bad = ours.AclBinding(
            binding.pattern,
            ours.AccessControlEntry("ops", "*", ours.Operation.ALTER, ours.Permission.ALLOW),
        )
        assert admin.create_acls([bad]) == {bad: ErrorCode.INVALID_REQUEST}
        assert "principal" in admin.last_errors[bad][1]
        assert admin.describe_acls() == [binding]
        assert admin.delete_acls([ours.AclBindingFilter(principal="User:ops")]) == [[binding]]
        assert admin.describe_acls() == []
    with (
        AdminClient(broker.bootstrap) as admin,
        pytest.raises(ErrorCode.SECURITY_DISABLED.exception),
    ):
        admin.describe_acls()


def test_acls_refuse_a_real_producer_and_consumer(acl_broker_factory):
    # Everyone may do what no ACL speaks of; the ACLs then deny ANONYMOUS one topic.
    b = acl_broker_factory(super_users="User:admin", allow_everyone=True)
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        admin.create_topics([NewTopic("open", 1, 1), NewTopic("secret", 1, 1)])
        denied = [
            ACL(ANONYMOUS, "*", op, ACLPermissionType.DENY,
                ResourcePattern(ResourceType.TOPIC, "secret"))
            for op in (ACLOperation.WRITE, ACLOperation.READ)
        ]  # fmt: skip
        assert admin.create_acls(denied)["failed"] == []
    finally:
        admin.close()

    producer = Producer({"bootstrap.servers": b.bootstrap, "message.timeout.ms": 10000})
    outcomes = {}
    for topic in ("open", "secret"):
        producer.produce(topic, b"x", on_delivery=lambda err, msg: outcomes.update(
            {msg.topic(): err}))  # fmt: skip
    producer.flush(30)
    assert outcomes["open"] is None
    assert outcomes["secret"].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "reader",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.assign([TopicPartition("open", 0, 0)])
        msg = None
        deadline = time.monotonic() + 30
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
        assert (msg.error(), msg.value()) == (None, b"x")
    finally:
        consumer.close()
    # librdkafka does not surface an assigned partition's refusal to poll(): the Fetch
    # answer itself, from our client's connection.
    host, port = b.bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port)) as conn:
        answer = conn.request(FETCH, fetch_body("secret", 0))
        assert answer["responses"][0]["partitions"][0]["error_code"] == (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED
        )
        answer = conn.request(FETCH, fetch_body("open", 0))
        assert answer["responses"][0]["partitions"][0]["error_code"] == 0
