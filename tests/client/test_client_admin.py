"""AdminClient against our broker and librdkafka's mock cluster: create, describe, list,
delete (the mock has no CreateTopics or DeleteTopics: those tests run on ours only)."""

from __future__ import annotations

import uuid

import pytest

from broker.client.admin import AdminClient, NewTopic, PartitionInfo
from broker.protocol.errors import (
    ErrorCode,
    TopicErrors,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)

NO_CREATE = "CreateTopics and DeleteTopics"


@pytest.fixture
def admin(kafka):
    with AdminClient(kafka.bootstrap) as client:
        yield client


def test_list_and_describe(kafka, admin):
    a, b = kafka.new_topic(3, prefix="adm", spread=True), kafka.new_topic(1, prefix="adm")
    assert {a, b} <= set(admin.list_topics())
    described = admin.describe_topics([a])
    assert list(described) == [a]
    partitions = described[a].partitions
    assert [p.partition for p in partitions] == list(range(len(partitions)))
    brokers = set(admin.cluster.brokers)
    for p in partitions:
        assert p.leader in brokers and p.leader in p.isr
        assert set(p.isr) <= set(p.replicas) <= brokers
    if kafka.kind == "ours":  # one broker: it leads and holds everything
        node = admin.cluster.controller_id
        assert partitions == [PartitionInfo(p, node, [node], [node]) for p in range(3)]
    else:  # three brokers, replication factor 3, leaders spread over them
        assert all(len(p.replicas) == 3 for p in partitions)
        assert len({p.leader for p in partitions}) > 1
    assert {a, b} <= set(admin.describe_topics())
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    with pytest.raises(UnknownTopicOrPartitionError, match=missing):
        admin.describe_topics([a, missing])


def test_create_describe_list_delete(kafka, admin):
    kafka.lacks(NO_CREATE)
    a, b = f"adm-{uuid.uuid4().hex[:8]}", f"adm-{uuid.uuid4().hex[:8]}"
    result = admin.create_topics(
        [NewTopic(a, 3), NewTopic(b, 1, configs={"retention.ms": "60000"})]
    )
    assert result == {a: ErrorCode.NONE, b: ErrorCode.NONE}
    assert {a, b} <= set(admin.list_topics())
    assert len(admin.describe_topics([a])[a].partitions) == 3

    assert admin.delete_topics([a]) == {a: ErrorCode.NONE}
    assert a not in admin.list_topics()
    assert b in admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError, match=a):
        admin.describe_topics([a])


def test_per_topic_errors_are_returned_or_raised(kafka, admin):
    kafka.lacks(NO_CREATE)
    name = f"adm-{uuid.uuid4().hex[:8]}"
    assert admin.create_topics([NewTopic(name, 1)]) == {name: ErrorCode.NONE}
    again = admin.create_topics([NewTopic(name, 1)])
    assert again == {name: ErrorCode.TOPIC_ALREADY_EXISTS}
    assert admin.last_errors[name][0] == ErrorCode.TOPIC_ALREADY_EXISTS

    with pytest.raises(TopicErrors) as info:
        admin.create_topics([NewTopic(name, 1), NewTopic("bad name!", 1)], raise_errors=True)
    assert info.value.errors[name][0] == ErrorCode.TOPIC_ALREADY_EXISTS
    assert info.value.errors["bad name!"][0] == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert "TOPIC_ALREADY_EXISTS" in str(info.value)

    missing = f"missing-{uuid.uuid4().hex[:8]}"
    assert admin.delete_topics([missing]) == {missing: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_validate_only_creates_nothing(kafka, admin):
    kafka.lacks(NO_CREATE)
    name = f"adm-{uuid.uuid4().hex[:8]}"
    assert admin.create_topics([NewTopic(name, 2)], validate_only=True) == {name: ErrorCode.NONE}
    assert name not in admin.list_topics()
    bad = admin.create_topics([NewTopic(name, 0)], validate_only=True)
    assert bad == {name: ErrorCode.INVALID_PARTITIONS}


def test_an_api_the_cluster_does_not_offer_is_a_clear_error(mock_cluster):
    with AdminClient(mock_cluster.bootstrap) as admin:
        with pytest.raises(UnsupportedVersionError, match="does not offer CreateTopics"):
            admin.create_topics([NewTopic("never", 1)])
        with pytest.raises(UnsupportedVersionError, match="does not offer DeleteTopics"):
            admin.delete_topics(["never"])


def test_fetching_a_deleted_topic_raises_unknown_topic(kafka, admin):
    kafka.lacks(NO_CREATE)
    from broker.client.simple_consumer import SimpleConsumer

    name = f"adm-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 1)], raise_errors=True)
    with SimpleConsumer(kafka.bootstrap, timeout_s=10) as consumer:
        assert consumer.fetch(name, 0, 0).error == ErrorCode.NONE  # cached as existing
        admin.delete_topics([name], raise_errors=True)
        with pytest.raises(UnknownTopicOrPartitionError):
            consumer.fetch(name, 0, 0)
