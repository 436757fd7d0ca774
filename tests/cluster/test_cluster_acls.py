"""ACLs in a cluster of broker processes: kept in ZooKeeper, so an ACL created through
one broker is in force on the others (their caches follow the change notifications), a
deletion through another broker reaches the first, and a broker restarted later reads
them all. Clients are User:ANONYMOUS over PLAINTEXT: a super user here (as the brokers'
own connections must be, having no other principal)."""

from __future__ import annotations

import pytest

from broker.client.connection import BrokerConnection
from broker.protocol.apis import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS
from broker.security.acl import Operation, PatternType, ResourceType
from tests.helpers.acls import acl_filter, authorizer_settings, creation, listed
from tests.helpers.cluster import wait_for

pytestmark = pytest.mark.slow


def connect(broker) -> BrokerConnection:
    host, port = broker.bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port))


def acls_on(broker) -> set[tuple]:
    with connect(broker) as conn:
        answer = conn.request(DESCRIBE_ACLS, acl_filter())
    assert answer["error_code"] == 0, answer
    return listed(answer)


def test_acls_made_on_one_broker_are_in_force_on_the_others(cluster_factory):
    c = cluster_factory(3, overrides=authorizer_settings("User:ANONYMOUS"))
    first, second, third = c.brokers
    made = [
        creation("User:alice", Operation.READ, ResourceType.TOPIC, "t"),
        creation("User:bob", Operation.WRITE, ResourceType.TOPIC, "app-",
                 pattern=PatternType.PREFIXED),
    ]  # fmt: skip
    with connect(first) as conn:
        results = conn.request(CREATE_ACLS, {"creations": made})["results"]
    assert [r["error_code"] for r in results] == [0, 0]
    expected = acls_on(first)
    assert len(expected) == 2
    for other in (second, third):
        wait_for(lambda o=other: acls_on(o) == expected, f"ACLs on broker {other}")

    with connect(second) as conn:
        (result,) = conn.request(DELETE_ACLS, {"filters": [acl_filter(principal="User:alice")]})[
            "filter_results"
        ]
    assert [m["principal"] for m in result["matching_acls"]] == ["User:alice"]
    wait_for(lambda: len(acls_on(first)) == 1, "deletion on the first broker")

    c.restart(c.ids[2])
    assert {a[3] for a in acls_on(c.broker(c.ids[2]))} == {"User:bob"}
