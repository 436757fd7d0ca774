"""tests/helpers/netns.py: hosts in network namespaces on one bridge, silent partitions of a
host or of a pair, and nothing left behind; a ZooKeeper session across a partition; a
cluster whose ZooKeeper and brokers each run on a host of their own."""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kazoo.protocol.states import EventType

from broker.client.cluster import ClusterMetadata
from broker.processes import ZooKeeperProcess, kazoo_session, port_answers
from tests.helpers import netns
from tests.helpers.netns import TestNetwork

PORT = 7777
# Connects within a second (exit 0) or not (exit 1); run inside a namespace.
CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()
except OSError:
    sys.exit(1)
"""
# Accepts and closes connections on ADDRESS:PORT; says "listening" once it does.
SERVE = """
import socket, sys
server = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
while True:
    server.accept()[0].close()
"""
PROBE = Path(__file__).resolve().parent.parent / "helpers" / "zk_session_probe.py"


def reaches(network: TestNetwork, source, address: str, port: int = PORT) -> bool:
    """Whether `source` (a namespaced host, or the machine) connects to address:port."""
    if source is network.machine:
        return port_answers(port, address)
    done = network.run(source, [sys.executable, "-c", CONNECT, address, str(port)])
    return done.wait(30) == 0


def serve(network: TestNetwork, host) -> subprocess.Popen:
    server = network.run(
        host, [sys.executable, "-c", SERVE, host.address, str(PORT)], stdout=subprocess.PIPE
    )
    assert server.stdout.readline() == b"listening\n"
    return server


def leftovers(tag: str) -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return [word for word in (listed + links).split() if word.startswith(tag)]


@pytest.mark.slow
def test_cut_and_heal_a_host_and_a_pair(network):
    a, b, c = (network.add_host(name) for name in "abc")
    server = serve(network, a)
    try:
        everyone = (b, c, network.machine)
        assert [reaches(network, h, a.address) for h in everyone] == [True, True, True]

        network.cut(a)
        assert [reaches(network, h, a.address) for h in everyone] == [False, False, False]
        assert reaches(network, b, c.address, 22) is False  # (nothing listens on c:22)
        network.heal(a)
        assert [reaches(network, h, a.address) for h in everyone] == [True, True, True]

        network.cut_between(b, a)  # either order names the same pair
        assert [reaches(network, h, a.address) for h in everyone] == [False, True, True]
        network.cut_between(a, network.machine)
        assert [reaches(network, h, a.address) for h in everyone] == [False, True, False]
        network.heal_between(a, b)
        assert [reaches(network, h, a.address) for h in everyone] == [True, True, False]
        network.heal_all()
        assert [reaches(network, h, a.address) for h in everyone] == [True, True, True]
    finally:
        server.kill()
        server.wait()


@pytest.mark.slow
def test_a_pair_cut_holds_both_ways(network):
    a, b = network.add_host("a"), network.add_host("b")
    servers = [serve(network, a), serve(network, b)]
    try:
        network.cut_between(a, b)
        assert not reaches(network, a, b.address) and not reaches(network, b, a.address)
        assert reaches(network, network.machine, a.address)
        assert reaches(network, network.machine, b.address)
    finally:
        for server in servers:
            server.kill()
            server.wait()


def test_close_removes_everything_even_with_processes_still_running():
    reason = netns.netns_unavailable()
    if reason:
        pytest.skip(reason)
    with pytest.raises(RuntimeError, match="the test failed"):
        with TestNetwork() as network:
            hosts = [network.add_host(f"h{i}") for i in range(3)]
            network.cut_between(hosts[0], hosts[1])  # leaves qdiscs and filters to remove
            server = serve(network, hosts[2])
            assert leftovers(network.tag)
            raise RuntimeError("the test failed")
    assert server.wait(10) == -9  # killed: it held the namespace (and its veth) alive
    assert leftovers(network.tag) == []


def test_remove_stale_takes_what_a_dead_owner_left_and_only_that(network):
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer runs: the owner of a killed run
    tag = f"{netns.NAME_PREFIX}{netns._base36(dead.pid)}-0"
    subprocess.run(["ip", "netns", "add", f"{tag}-orphan"], check=True)
    subprocess.run(["ip", "link", "add", f"{tag}br", "type", "bridge"], check=True)
    live = network.add_host("live")  # owned by this test's process: it stays

    removed = netns.remove_stale()
    assert sorted(removed) == [f"{tag}-orphan", f"{tag}br"]
    assert leftovers(tag) == []
    assert live.namespace in leftovers(network.tag)


class Lines:
    """A process's output lines, read on a thread, awaited with a deadline."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            self._queue.put(line.strip())

    def expect(self, wanted: str, timeout_s: float = 30.0) -> None:
        while True:
            try:
                line = self._queue.get(timeout=timeout_s)
            except queue.Empty:
                pytest.fail(f"no {wanted!r} within {timeout_s}s; saw {self.seen}")
            self.seen.append(line)
            if line == wanted:
                return


@pytest.mark.slow
def test_a_zookeeper_session_across_a_cut_is_suspended_expires_and_is_renewed(network, tmp_path):
    # ZooKeeper on the machine (the bridge's address); short ticks allow a 2 s session.
    with ZooKeeperProcess(tmp_path / "zk", host=network.machine, tick_ms=500) as zk:
        client_host = network.add_host("client")
        probe = network.run(
            client_host,
            [sys.executable, str(PROBE), zk.connect, "/probe", "2"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            lines = Lines(probe)
            lines.expect("CONNECTED")
            lines.expect("CREATED")
            with kazoo_session(zk.connect) as watcher:
                expired = threading.Event()
                stat = watcher.exists(
                    "/probe", watch=lambda e: e.type == EventType.DELETED and expired.set()
                )
                assert stat is not None and stat.ephemeralOwner != watcher.client_id[0]

                network.cut(client_host)
                lines.expect("SUSPENDED")  # the client hears nothing more
                assert expired.wait(30)  # the server ends the silent session
                network.heal(client_host)
                lines.expect("LOST")  # told on reconnecting: the session is gone
                lines.expect("CONNECTED")  # a new one
        finally:
            probe.stdin.close()
            probe.wait(30)
    assert lines.seen == ["CONNECTED", "CREATED", "SUSPENDED", "LOST", "CONNECTED"]


@pytest.mark.slow
def test_a_cluster_whose_zookeeper_and_brokers_run_on_hosts_of_their_own(
    netns_cluster_factory, network
):
    cluster = netns_cluster_factory(3)
    zk_host = cluster.zookeeper.host
    assert cluster.zookeeper.connect == f"{zk_host.address}:{cluster.zookeeper.port}"
    addresses = {cluster.hosts[i].address for i in cluster.ids} | {zk_host.address}
    assert len(addresses) == 4  # each on a host of its own
    for i in cluster.ids:
        broker = cluster.broker(i)
        assert broker.bootstrap == f"{cluster.hosts[i].address}:{broker.port}"
        assert broker.overrides["zookeeper.connect"].startswith(zk_host.address)
        # A client on the machine is told the broker's own address, and reaches it.
        metadata = ClusterMetadata(broker.bootstrap, timeout_s=10)
        try:
            deadline = time.monotonic() + 20  # until the controller's UpdateMetadata arrived
            while set(metadata.brokers) != set(cluster.ids) and time.monotonic() < deadline:
                time.sleep(0.1)
                metadata.refresh()
            assert f"{metadata.brokers[i].host}:{metadata.brokers[i].port}" == broker.bootstrap
        finally:
            metadata.close()
        # ZooKeeper is reachable from the broker's host.
        assert reaches(network, cluster.hosts[i], zk_host.address, cluster.zookeeper.port)

    # Broker 0 cut off from ZooKeeper and the other brokers; clients still reach it.
    zk_port, b1 = cluster.zookeeper.port, cluster.broker(1)
    network.partition([cluster.hosts[0]], [zk_host, cluster.hosts[1], cluster.hosts[2]])
    assert not reaches(network, cluster.hosts[0], zk_host.address, zk_port)
    assert not reaches(network, cluster.hosts[0], b1.host.address, b1.port)
    assert reaches(network, cluster.hosts[1], zk_host.address, zk_port)
    assert port_answers(cluster.broker(0).port, cluster.hosts[0].address)
    network.cut(cluster.hosts[0])
    assert not port_answers(cluster.broker(0).port, cluster.hosts[0].address)
    network.heal_all()
    assert port_answers(cluster.broker(0).port, cluster.hosts[0].address)
    assert cluster.stop() == {0: 0, 1: 0, 2: 0}


def test_the_machine_cannot_reach_a_namespace_through_loopback(network):
    # What runs on 127.0.0.1 of the machine is not on the network: servers the hosts use
    # must listen on network.machine's address.
    host = network.add_host("a")
    with socket.create_server(("127.0.0.1", 0)) as local:
        port = local.getsockname()[1]
        assert reaches(network, network.machine, "127.0.0.1", port)
        assert not reaches(network, host, "127.0.0.1", port)


def test_where_namespaces_cannot_be_made_the_reason_says_why(monkeypatch):
    netns.netns_unavailable.cache_clear()
    try:
        monkeypatch.setenv("PATH", "/nonexistent")
        assert netns.netns_unavailable() == "no `ip` command (iproute2) on this machine"
        netns.netns_unavailable.cache_clear()
        monkeypatch.setattr(os, "geteuid", lambda: 1000)  # the one thing a test cannot be
        assert "need root" in netns.netns_unavailable()
    finally:
        monkeypatch.undo()
        netns.netns_unavailable.cache_clear()


# Prints the first datagram received on ADDRESS:PORT within 1 s ("none" if none came);
# says "listening" once bound. UDP: one packet one way, where TCP needs both.
RECEIVE = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(1)
print("listening", flush=True)
try:
    print(s.recv(100).decode(), flush=True)
except OSError:
    print("none", flush=True)
"""
SEND = """
import socket, sys
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"hello", (sys.argv[1], int(sys.argv[2])))
"""


def datagram_arrives(network: TestNetwork, sender, receiver) -> bool:
    listener = network.run(
        receiver,
        [sys.executable, "-c", RECEIVE, receiver.address, str(PORT)],
        stdout=subprocess.PIPE,
    )
    assert listener.stdout.readline() == b"listening\n"
    network.run(sender, [sys.executable, "-c", SEND, receiver.address, str(PORT)]).wait(30)
    arrived = listener.stdout.readline() == b"hello\n"
    listener.wait(30)
    return arrived


@pytest.mark.slow
def test_a_one_way_cut_drops_only_what_one_side_sends(network):
    a, b = network.add_host("a"), network.add_host("b")
    network.cut_one_way(b, a)  # b's packets to a are dropped, a's to b pass
    assert not datagram_arrives(network, b, a)
    assert datagram_arrives(network, a, b)
    network.partition_one_way([a], [b])  # now both ways, cut by two one-way cuts
    assert not datagram_arrives(network, a, b)
    network.heal_one_way(b, a)
    assert datagram_arrives(network, b, a) and not datagram_arrives(network, a, b)
    network.heal_all()
    assert datagram_arrives(network, a, b)
