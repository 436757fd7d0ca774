"""Clusters of ZooKeeper and brokers as processes (`broker.processes.Cluster`), and networks
of namespaced hosts for partition tests (`tests/helpers/netns.py`).

Start-up is cheap (ZooKeeper and three brokers in under two seconds, a cluster on the
session's ZooKeeper in well under one) but not free: tests that only produce, consume and
read metadata share the module's `cluster`; tests that kill, restart, stop or partition
brokers own theirs (`cluster_factory`, from tests/conftest.py; `network`) and are marked `slow`
(`pytest -m "not slow"` leaves them out)."""

from __future__ import annotations

import pytest

from broker.processes import Cluster, ZooKeeperProcess
from tests.helpers.netns import TestNetwork, netns_unavailable


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    """Three brokers shared by a test module, on the session's ZooKeeper (a chroot of their
    own). Create topics of the test's own; do not stop, kill or partition these brokers."""
    with Cluster(tmp_path_factory.mktemp("cluster"), 3, zookeeper=zookeeper) as c:
        yield c


@pytest.fixture
def network():
    """A `TestNetwork` (bridge and namespaced hosts), removed after the test whatever
    happened; the test is skipped, saying why, where namespaces cannot be made."""
    reason = netns_unavailable()
    if reason is not None:
        pytest.skip(reason)
    with TestNetwork() as net:
        yield net


@pytest.fixture
def netns_cluster_factory(network, tmp_path):
    """`make(brokers=3, zookeeper_tick_ms=2000, **Cluster keywords)`: a started cluster with
    ZooKeeper on the network's host "zookeeper" and broker i on host "broker<i>", each in
    its namespace; the test itself runs on the machine, which reaches them all. Cut with
    `network.cut(cluster.hosts[i])`, `network.cut_between(cluster.hosts[i],
    cluster.zookeeper.host)`, `network.partition([cluster.hosts[leader]],
    [cluster.zookeeper.host, *followers' hosts])`. Healed and stopped before the network is
    removed."""
    made: list[Cluster] = []

    def make(brokers=3, *, zookeeper_tick_ms: int = 2000, **kwargs) -> Cluster:
        work = tmp_path / f"cluster-{len(made)}"
        ids = list(range(brokers)) if isinstance(brokers, int) else list(brokers)
        zookeeper = ZooKeeperProcess(
            work / "zookeeper",
            host=network.add_host(f"zookeeper{len(made)}" if made else "zookeeper"),
            tick_ms=zookeeper_tick_ms,
            log_path=work / "logs" / "zookeeper.log",
        )
        hosts = {i: network.add_host(f"broker{i}" + (f"-{len(made)}" if made else "")) for i in ids}
        c = Cluster(work, ids, zookeeper=zookeeper, hosts=hosts, **kwargs)
        made.append(c)
        return c.start()

    yield make
    network.heal_all()  # cut-off brokers would spend their shutdown waiting for the others
    for c in made:
        c.stop()
