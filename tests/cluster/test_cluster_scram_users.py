"""SCRAM users of a cluster live in ZooKeeper: created through one broker with our admin
client over SASL_SSL, every broker lets them in (the change notification reaches each
broker's credentials); deleted, every broker refuses them."""

from __future__ import annotations

import pytest

from broker.client.admin import (
    AdminClient,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from broker.client.connection import BrokerConnection
from broker.client.security import SecurityConfig
from broker.processes import kazoo_session
from broker.protocol.errors import ErrorCode, SaslAuthenticationFailedError
from tests.cluster.test_cluster_sasl_ssl import PASSWORDS, SCRAM, sasl_cluster  # noqa: F401
from tests.helpers.cluster import fresh, wait_for

pytestmark = pytest.mark.slow


def security(client: dict, user: str, password: str) -> SecurityConfig:
    return SecurityConfig(
        "SASL_SSL",
        ssl_cafile=client["ssl.ca.location"],
        sasl_mechanism=SCRAM,
        sasl_plain_username=user,
        sasl_plain_password=password,
    )


def logs_in(broker, login: SecurityConfig) -> bool:
    try:
        with BrokerConnection(broker.host.address, broker.port, security=login, timeout_s=10):
            return True
    except SaslAuthenticationFailedError:
        return False


def test_users_made_through_one_broker_reach_every_broker(sasl_cluster):  # noqa: F811
    cluster, client = sasl_cluster
    admin_login = security(client, "alice", PASSWORDS["alice"])
    first = cluster.brokers[0]
    wait_for(lambda: logs_in(first, admin_login), "the cluster lets alice in")
    user = fresh("erin")
    erin = security(client, user, "erin-pw-4")
    with AdminClient(f"{first.host.address}:{first.port}", security=admin_login) as admin:
        created = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(user, SCRAM, "erin-pw-4")]
        )
        assert created == {user: ErrorCode.NONE}
        with kazoo_session(cluster.zookeeper_connect) as zk:
            assert zk.exists(f"/config/users/{user}")
        for broker in cluster.brokers:
            wait_for(lambda b=broker: logs_in(b, erin), f"{broker.address} lets {user} in")

        deleted = admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, SCRAM)])
        assert deleted == {user: ErrorCode.NONE}
    for broker in cluster.brokers:
        wait_for(lambda b=broker: not logs_in(b, erin), f"{broker.address} refuses {user}")
