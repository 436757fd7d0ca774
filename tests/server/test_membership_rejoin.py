"""A broker whose ZooKeeper session expired registers again in the new one, retrying
until it can (docs/contracts/cluster.md): a failed attempt used to leave a live broker
unregistered, invisible to the controller, until it restarted."""

from __future__ import annotations

from broker.cluster import BrokerRegistration, Endpoint
from broker.config.server import BrokerConfig
from broker.server.modes import membership
from broker.server.modes.membership import ClusterMembership
from broker.zk import layout as z
from broker.zk.client import ConnectionLoss
from tests.helpers.aio import run, until


def test_a_failed_registration_in_a_new_session_is_retried(zk_connect, tmp_path, monkeypatch):
    monkeypatch.setattr(membership, "REJOIN_BACKOFF_S", 0.01)
    config = BrokerConfig.from_mapping(
        {"broker.id": "7", "log.dirs": str(tmp_path), "zookeeper.connect": zk_connect}
    )

    async def scenario():
        member = ClusterMembership(config)
        await member.zk.start()
        try:
            await member.zk.ensure_paths(z.PERSISTENT_PATHS)
            endpoint = Endpoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")
            member.registration = BrokerRegistration(7, (endpoint,), None, 0)
            register, attempts = member._register, []

            async def lost_once():
                attempts.append(1)
                if len(attempts) == 1:
                    raise ConnectionLoss()
                await register()

            member._register = lost_once
            renewed = []
            member.controller = type("C", (), {"session_renewed": lambda _: renewed.append(1)})()
            await member._rejoin()
            assert len(attempts) == 2 and renewed == [1]
            assert await until(lambda: member.zk.exists(z.broker_path(7)), "registered")
        finally:
            await member.zk.close()

    run(scenario())
