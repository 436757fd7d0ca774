"""AdminClient against a real broker: create, describe, list, delete."""

from __future__ import annotations

import uuid

import pytest

from broker.client.admin import AdminClient, NewTopic, PartitionInfo
from broker.protocol.errors import ErrorCode, TopicErrors, UnknownTopicOrPartitionError


@pytest.fixture
def admin(broker):
    with AdminClient(broker.bootstrap) as client:
        yield client


def test_create_describe_list_delete(admin):
    a, b = f"adm-{uuid.uuid4().hex[:8]}", f"adm-{uuid.uuid4().hex[:8]}"
    result = admin.create_topics(
        [NewTopic(a, 3), NewTopic(b, 1, configs={"retention.ms": "60000"})]
    )
    assert result == {a: ErrorCode.NONE, b: ErrorCode.NONE}
    assert {a, b} <= set(admin.list_topics())

    described = admin.describe_topics([a])
    assert list(described) == [a]
    node = admin.cluster.controller_id
    assert described[a].partitions == [PartitionInfo(p, node, [node], [node]) for p in range(3)]
    assert {a, b} <= set(admin.describe_topics())

    assert admin.delete_topics([a]) == {a: ErrorCode.NONE}
    assert a not in admin.list_topics()
    assert b in admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError, match=a):
        admin.describe_topics([a])


def test_per_topic_errors_are_returned_or_raised(admin):
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


def test_validate_only_creates_nothing(admin):
    name = f"adm-{uuid.uuid4().hex[:8]}"
    assert admin.create_topics([NewTopic(name, 2)], validate_only=True) == {name: ErrorCode.NONE}
    assert name not in admin.list_topics()
    bad = admin.create_topics([NewTopic(name, 0)], validate_only=True)
    assert bad == {name: ErrorCode.INVALID_PARTITIONS}


def test_fetching_a_deleted_topic_raises_unknown_topic(broker, admin):
    from broker.client.simple_consumer import SimpleConsumer

    name = f"adm-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 1)], raise_errors=True)
    with SimpleConsumer(broker.bootstrap, timeout_s=10) as consumer:
        assert consumer.fetch(name, 0, 0).error == ErrorCode.NONE  # cached as existing
        admin.delete_topics([name], raise_errors=True)
        with pytest.raises(UnknownTopicOrPartitionError):
            consumer.fetch(name, 0, 0)
