"""broker.processes.Cluster and `python -m broker cluster`: ZooKeeper and three brokers as
processes, with the ids, chroot, log dirs, ports and racks a cluster needs; kill, restart,
an orderly stop; the registration hook, against a real ZooKeeper.

Brokers do not join a cluster yet (they read `zookeeper.connect` and run alone), so these
tests check what a broker shows today (its id, its address, its log dir) and test the
registration hook with registrations written as a broker writes them."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from broker.client.cluster import ClusterMetadata
from broker.client.connection import BrokerConnection
from broker.cluster import BrokerRegistration, Endpoint
from broker.processes import ROOT, Cluster, kazoo_session, port_answers
from broker.protocol.apis import METADATA
from broker.zk.layout import (
    BROKER_IDS,
    CONTROLLER,
    broker_path,
    encode_broker,
    encode_controller,
)
from tests.helpers.cluster import FAST_FAILOVER


def meta_properties(log_dir: Path) -> dict[str, str]:
    lines = (log_dir / "meta.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def test_every_broker_has_its_id_address_log_dir_and_chroot(cluster):
    assert cluster.ids == [0, 1, 2]
    assert cluster.bootstrap == ",".join(cluster.broker(i).bootstrap for i in (0, 1, 2))
    assert cluster.chroot.startswith("/cluster-")  # its own, on the session's ZooKeeper
    assert cluster.zookeeper_connect == cluster.zookeeper.connect + cluster.chroot
    for i in cluster.ids:
        broker = cluster.broker(i)
        assert broker.overrides["broker.id"] == str(i)
        assert broker.overrides["zookeeper.connect"] == cluster.zookeeper_connect
        assert broker.log_dir == cluster.work / f"broker-{i}"
        assert broker.log_path == cluster.work / "logs" / f"broker-{i}.log"
        assert meta_properties(broker.log_dir)["broker.id"] == str(i)
        # What a client is told: this broker, under its id, at its address.
        metadata = ClusterMetadata(broker.bootstrap, timeout_s=10)
        try:
            info = metadata.brokers[i]
        finally:
            metadata.close()
        assert f"{info.host}:{info.port}" == broker.bootstrap
    with pytest.raises(KeyError, match=r"no broker 7 .*\[0, 1, 2\]"):
        cluster.broker(7)


@pytest.mark.slow
def test_a_cluster_of_its_own_starts_and_stops_zookeeper_after_the_brokers(cluster_factory):
    c = cluster_factory(3, zookeeper=None, base_port=None)
    assert c.chroot == "/kafka-hourly"  # fixed: a restarted cluster finds its metadata
    assert (c.work / "logs" / "zookeeper.log").exists()
    assert (c.work / "zookeeper" / "zoo.cfg").exists()
    with kazoo_session(c.zookeeper.connect) as client:
        assert client.exists("/zookeeper") is not None
    ports = [c.zookeeper.port] + [b.port for b in c.brokers]
    assert all(port_answers(p) for p in ports)
    codes = c.stop()
    assert codes == {0: 0, 1: 0, 2: 0}  # SIGTERM: a clean exit
    assert not any(port_answers(p) for p in ports)
    assert c.zookeeper.proc is None


@pytest.mark.slow
def test_kill_and_restart_keep_the_id_log_dir_log_and_port(cluster_factory):
    # The restart waits for the killed broker's registration to go with its ZooKeeper
    # session: a short session (not the 18 s default) keeps that wait short.
    c = cluster_factory(3, overrides=FAST_FAILOVER)
    broker = c.broker(1)
    port, pid = broker.port, broker.proc.pid
    c.kill(1)
    assert broker.proc is None and not port_answers(port)
    assert all(port_answers(c.broker(i).port) for i in (0, 2))  # the others live on
    assert c.restart(1) is broker and broker.proc.pid != pid
    assert broker.port == port and port_answers(port)
    assert meta_properties(broker.log_dir)["broker.id"] == "1"
    assert broker.log_text().count("broker 1 serving on") == 2  # one log, both lives

    # A restart on another port: same id, log dir and log.
    moved = c.restart(1, port=_free_ports(1)[0])
    assert moved.port != port and port_answers(moved.port) and not port_answers(port)
    assert moved.log_dir == broker.log_dir and moved.log_path == broker.log_path
    assert c.broker(1) is moved and moved.bootstrap in c.bootstrap


def _metadata(broker) -> tuple[int, list[int]]:
    with BrokerConnection(broker.host.address, broker.port) as conn:
        md = conn.request(METADATA, {"topics": [], "allow_auto_topic_creation": False})
    return md["controller_id"], sorted(b["node_id"] for b in md["brokers"])


@pytest.mark.slow
def test_started_and_restarted_brokers_know_the_cluster(cluster_factory):
    """Before the controller's first UpdateMetadata, a broker answers Metadata with no
    brokers and no controller (which librdkafka's admin client never asks again after):
    start() and restart() return only once every broker knows the cluster."""
    c = cluster_factory(3)
    controller = c.controller()
    assert [_metadata(b) for b in c.brokers] == [(controller, [0, 1, 2])] * 3
    c.restart(2)  # SIGTERM and start again
    assert _metadata(c.broker(2)) == (c.controller(), [0, 1, 2])


@pytest.mark.slow
def test_stop_takes_the_controller_last(cluster_factory):
    c = cluster_factory(3)
    with kazoo_session(c.zookeeper.connect) as client:
        if c.controller() is None:
            # Brokers do not elect a controller yet: write /controller as the elected one
            # does; broker 0, which would otherwise go first.
            path = c.chroot + CONTROLLER
            client.create(path, encode_controller(0, 0), ephemeral=True, makepath=True)
        controller = c.controller()
        codes = c.stop()
    assert list(codes)[-1] == controller and sorted(codes) == [0, 1, 2]


def test_racks_ids_and_overrides_reach_each_broker(tmp_path):
    c = Cluster(
        tmp_path,
        [3, 5],
        racks=["r1", "r2"],
        base_port=19500,
        overrides={"num.partitions": "6", "default.replication.factor": "2"},
        broker_overrides={5: {"num.partitions": "1"}},
    )
    assert c.ids == [3, 5]
    assert [b.port for b in c.brokers] == [19500, 19501]
    three, five = c.broker(3).overrides, c.broker(5).overrides
    assert (three["broker.rack"], five["broker.rack"]) == ("r1", "r2")
    assert (three["num.partitions"], five["num.partitions"]) == ("6", "1")
    assert five["default.replication.factor"] == "2" and five["broker.id"] == "5"
    assert "--override" in c.broker(5).command() and "broker.rack=r2" in c.broker(5).command()
    assert "broker.rack" not in Cluster(tmp_path / "plain", 2).broker(0).overrides
    with pytest.raises(ValueError, match="2 racks for 3 brokers"):
        Cluster(tmp_path, 3, racks=["r1", "r2"])
    with pytest.raises(ValueError, match="distinct"):
        Cluster(tmp_path, [1, 1])


def test_wait_registered_waits_for_every_broker_and_for_a_new_registration(zookeeper, tmp_path):
    # Brokers not started: the registrations are written here, as a broker writes its own.
    c = Cluster(tmp_path, 2, zookeeper=zookeeper)

    def register(client, broker_id: int) -> None:
        endpoint = Endpoint("PLAINTEXT", "127.0.0.1", c.broker(broker_id).port)
        registration = encode_broker(BrokerRegistration(broker_id, (endpoint,), rack="r1"))
        client.create(broker_path(broker_id), registration, ephemeral=True, makepath=True)

    with kazoo_session(c.zookeeper_connect) as client:
        client.ensure_path(BROKER_IDS)
        with pytest.raises(TimeoutError, match=r"brokers \[0, 1\] not registered.*broker-0.log"):
            c.wait_registered([0, 1], timeout_s=0.3)
        register(client, 0)
        later = threading.Timer(0.3, register, (client, 1))
        later.start()
        found = c.wait_registered([0, 1], timeout_s=10)
        later.join()
        assert sorted(found) == [0, 1]
        assert found[1].endpoints[0].port == c.broker(1).port and found[1].rack == "r1"
        assert c.registrations() == found

        # A restarted broker's registration is a new znode: the old one does not count.
        epoch = found[0].epoch
        with pytest.raises(TimeoutError, match=r"brokers \[0\]"):
            c.wait_registered([0], newer_than={0: epoch}, timeout_s=0.3)
        client.delete(broker_path(0))
        register(client, 0)
        assert c.wait_registered([0], newer_than={0: epoch})[0].epoch > epoch


# -- python -m broker cluster ------------------------------------------------------------


def _free_ports(n: int) -> list[int]:
    """n consecutive ports nothing listens on (the broker ports of a --base-port)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        held = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port))
            return list(range(base, base + n))
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError(f"no {n} consecutive free ports")


COMMAND = [sys.executable, "-m", "broker", "cluster"]


def cluster_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


@contextmanager
def started_command(work: Path, *extra: str) -> Iterator[tuple[subprocess.Popen, list[str]]]:
    """`cluster start` of 2 brokers in the background, once it has said where all is: the
    process and the lines it printed. Killed at the end if it still runs."""
    ports = _free_ports(3)
    args = ["start", "--brokers", "2", "--dir", str(work), "--base-port", str(ports[0]),
            "--zookeeper-port", str(ports[2]), *extra]  # fmt: skip
    proc = subprocess.Popen(
        [*COMMAND, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("Ctrl-C") or "error" in line:
                break
        yield proc, lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def printed(lines: list[str], key: str) -> str:
    return next(line.split("=", 1)[1] for line in lines if line.startswith(key + "="))


def answers(address: str) -> bool:
    host, _, port = address.rpartition(":")
    return port_answers(int(port), host)


@pytest.mark.slow
def test_the_command_runs_a_cluster_in_the_foreground_and_cluster_stop_ends_it(tmp_path):
    work = tmp_path / "cluster"
    with started_command(work, "--override", "num.partitions=2") as (proc, lines):
        bootstrap = printed(lines, "bootstrap.servers").split(",")
        assert len(bootstrap) == 2 and all(answers(a) for a in bootstrap)
        assert printed(lines, "zookeeper.connect").endswith("/kafka-hourly")
        assert any(f"{work}/logs/broker-1.log" in line for line in lines)
        assert int((work / "cluster.pid").read_text()) == proc.pid
        # --override reached the brokers: an auto-created topic gets num.partitions=2 (the
        # controller creates it; it has leaders soon after the request).
        metadata = ClusterMetadata(bootstrap[1], timeout_s=10)
        try:
            metadata.refresh(["auto"], allow_auto_create=True)
            assert metadata.wait_for_leaders(["auto"], 20)
            assert len(metadata.partitions_for("auto")) == 2
        finally:
            metadata.close()
        # A second cluster on the same directory is refused.
        again = cluster_command("start", "--dir", str(work))
        assert again.returncode == 1 and "already running" in again.stderr

        stop = cluster_command("stop", "--dir", str(work))
        assert stop.returncode == 0, stop.stderr
        assert proc.wait(30) == 0
        out = proc.stdout.read()
        # Both brokers exited cleanly (0), the controller last.
        assert re.search(r"stopped \(broker [01]: 0, broker [01]: 0\)", out)
    assert not (work / "cluster.pid").exists()
    assert not any(answers(a) for a in bootstrap)


@pytest.mark.slow
def test_ctrl_c_stops_the_brokers_then_zookeeper(tmp_path):
    with started_command(tmp_path / "cluster") as (proc, lines):
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        rest = proc.stdout.read()
    assert "stopping: brokers (SIGTERM), then ZooKeeper" in rest
    # Both brokers exited cleanly (0), the controller (either) last.
    assert re.search(r"stopped \(broker [01]: 0, broker [01]: 0\)", rest)
    assert not answers(printed(lines, "zookeeper.connect").split("/")[0])


def test_the_command_refuses_bad_racks_and_overrides(tmp_path):
    bad_racks = cluster_command("start", "--dir", str(tmp_path), "--rack", "r1,r2")
    assert bad_racks.returncode == 2 and "2 racks for 3 brokers" in bad_racks.stderr
    bad_override = cluster_command("start", "--dir", str(tmp_path), "--override", "num.partitions")
    assert bad_override.returncode == 2 and "'num.partitions'" in bad_override.stderr
    nothing = cluster_command("stop", "--dir", str(tmp_path))
    assert nothing.returncode == 1 and "no cluster running" in nothing.stderr
