"""broker.processes: the servers the tests, benchmarks and demo run, started as users start
them. The broker and the registry are exercised by every fixture; here, what the fixtures do
not show: a failed start names its reason, and the ZooKeeper server, checked with kazoo."""

from __future__ import annotations

import socket
import threading

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import EventType

from broker.processes import BrokerProcess, RegistryProcess, ZooKeeperProcess, port_answers


def test_a_failed_start_raises_with_the_end_of_the_log(tmp_path):
    broker = BrokerProcess(tmp_path / "logs", {"num.partitions": "zero"})
    with pytest.raises(RuntimeError) as raised:
        broker.start()
    message = str(raised.value)
    assert "broker exited with code 2" in message
    assert "num.partitions" in message and "'zero'" in message
    assert str(broker.log_path) in message
    assert broker.proc is None


def test_registry_settings_and_restart_keep_one_log(tmp_path):
    registry = RegistryProcess(tmp_path, settings={"kafkastore.type": "memory"})
    with registry:
        assert port_answers(registry.port)
    assert not port_answers(registry.port)
    with registry:
        assert port_answers(registry.port)
    assert registry.log_text().count("Application startup complete") == 2
    assert "kafkastore.type=memory" in registry.config.read_text()


@pytest.fixture
def zookeeper(tmp_path):
    with ZooKeeperProcess(tmp_path / "zk") as zk:
        yield zk


def client(zk: ZooKeeperProcess) -> KazooClient:
    c = KazooClient(hosts=zk.connect, timeout=10.0)
    c.start(timeout=10.0)
    return c


def test_zookeeper_keeps_znodes_in_the_data_dir_across_a_restart(zookeeper, tmp_path):
    c = client(zookeeper)
    try:
        c.create("/brokers/ids/0", b'{"port": 9092}', makepath=True)
        data, stat = c.get("/brokers/ids/0")
        assert data == b'{"port": 9092}' and stat.version == 0
        c.set("/brokers/ids/0", b'{"port": 9093}')
    finally:
        c.stop()
        c.close()
    assert any((tmp_path / "zk" / "data").rglob("log.*"))  # its transaction log
    zookeeper.stop()
    assert not port_answers(zookeeper.port)
    zookeeper.start()
    c = client(zookeeper)
    try:
        data, stat = c.get("/brokers/ids/0")
        assert data == b'{"port": 9093}' and stat.version == 1
    finally:
        c.stop()
        c.close()


def test_an_ephemeral_znode_disappears_when_its_session_closes(zookeeper):
    owner, watcher = client(zookeeper), client(zookeeper)
    try:
        owner.create("/controller", b'{"brokerid": 0}', ephemeral=True)
        data, stat = watcher.get("/controller")
        assert data == b'{"brokerid": 0}'
        assert stat.ephemeralOwner == owner.client_id[0]
        deleted = threading.Event()
        watcher.exists("/controller", watch=lambda e: e.type == EventType.DELETED and deleted.set())
        owner.stop()  # closes the session, as a broker that shuts down does
        assert deleted.wait(10)
        assert watcher.exists("/controller") is None
    finally:
        for c in (owner, watcher):
            c.stop()
            c.close()


def test_zookeeper_answers_no_four_letter_words_but_srvr(zookeeper):
    with socket.create_connection(("127.0.0.1", zookeeper.port), timeout=5) as s:
        s.sendall(b"ruok")
        answer = s.recv(200)
    assert b"imok" not in answer and b"not in the whitelist" in answer
    assert "admin.enableServer=false" in zookeeper.config.read_text()
    assert "AdminServer" not in zookeeper.log_text()  # not even tried
    assert "binding to port /127.0.0.1:" in zookeeper.log_text()
