"""A broker in a cluster serves nothing until it is registered (docs/contracts/cluster.md,
"A broker in a cluster"). A restarted broker waits for its predecessor's registration to
expire; served meanwhile, it answered Metadata from an empty cache, "no brokers", and
librdkafka dropped every broker it knew, its transaction coordinator included: the
fault campaign's copier stalled until its transaction timed out (docs/faults.md, F8)."""

from __future__ import annotations

from broker.client.connection import BrokerConnection
from broker.cluster import BrokerRegistration, Endpoint
from broker.processes import BrokerProcess, kazoo_session, port_answers
from broker.protocol.apis import METADATA
from broker.zk import layout as z
from tests.helpers.cluster import wait_for


def test_a_broker_waiting_for_its_old_registration_refuses_connections(zk_connect, tmp_path):
    zk_hosts, chroot = zk_connect.split("/", 1)
    broker = BrokerProcess(
        tmp_path / "logs",
        {"broker.id": "0", "zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": "6000"},
    )
    # The registration a killed predecessor leaves behind: an ephemeral node of a session
    # still alive (this one), at the same address.
    endpoint = Endpoint("PLAINTEXT", broker.host.address, broker.port)
    with kazoo_session(zk_hosts) as old_session:
        old_session.create(
            f"/{chroot}{z.broker_path(0)}",
            z.encode_broker(BrokerRegistration(0, (endpoint,), None, 0)),
            ephemeral=True,
            makepath=True,
        )
        broker.spawn()
        try:
            wait_for(
                lambda: "still registered by an earlier session" in broker.log_text(),
                "the broker waiting for the old registration",
            )
            # Not a broker of the cluster yet: nothing to answer, as a stopped one.
            assert not port_answers(broker.port, broker.host.address)
        except BaseException:
            broker.kill()
            raise
    # The old session ends, its registration goes: the broker registers and serves.
    with broker:
        broker.wait_until_ready()
        conn = BrokerConnection(broker.host.address, broker.port, timeout_s=10)
        try:
            body = {"topics": [], "allow_auto_topic_creation": False,
                    "include_cluster_authorized_operations": False,
                    "include_topic_authorized_operations": False}  # fmt: skip
            answer = wait_for(
                lambda: (m := conn.request(METADATA, body))["brokers"] and m,
                "the broker in its own metadata",
            )
        finally:
            conn.close()
        assert [b["node_id"] for b in answer["brokers"]] == [0]
        assert "broker 0 registered" in broker.log_text()
