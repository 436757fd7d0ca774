"""Clusters for the fault campaign's quick variants. Each has a ZooKeeper of its own (the
nemeses kill and pause it) and the campaign's settings (`campaign.FAULT_CLUSTER`). One
cluster is shared by the runs (a ZooKeeper of its own: they kill it) whose faults it recovers from (each run its own topic);
full disks, skewed clocks and partitions need clusters built for them."""

from __future__ import annotations

import pytest

from broker.processes import Cluster, ZooKeeperProcess
from tests.faults import campaign, nemesis
from tests.helpers.netns import TestNetwork, netns_unavailable


@pytest.fixture(scope="package")
def fault_cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("faults"), 3, overrides=campaign.FAULT_CLUSTER) as c:
        yield c


@pytest.fixture
def disk_cluster(tmp_path, zookeeper):
    """Three brokers whose log dirs are 24 MB tmpfs mounts (on the session's ZooKeeper)."""
    reason = nemesis.tmpfs_unavailable()
    if reason:
        pytest.skip(reason)
    dirs = {i: tmp_path / f"broker-{i}" for i in range(3)}
    mounted = []
    try:
        for path in dirs.values():
            nemesis.mount_tmpfs(path)
            mounted.append(path)
        with Cluster(tmp_path, 3, zookeeper=zookeeper, overrides=campaign.FAULT_CLUSTER) as c:
            yield c, dirs
    finally:
        for path in mounted:
            nemesis.unmount(path)


@pytest.fixture
def skewed_cluster(tmp_path, zookeeper):
    """Three brokers running under libfaketime, each with its clock file (on the session's
    ZooKeeper)."""
    reason = nemesis.faketime_unavailable()
    if reason:
        pytest.skip(reason)
    files = {i: tmp_path / f"clock-{i}" for i in range(3)}
    hosts = {i: nemesis.faketime_prefix(f) for i, f in files.items()}
    with Cluster(
        tmp_path, 3, zookeeper=zookeeper, overrides=campaign.FAULT_CLUSTER, hosts=hosts
    ) as c:
        yield c, files


@pytest.fixture
def netns_cluster(tmp_path):
    """ZooKeeper and three brokers each in a network namespace (tests/helpers/netns.py)."""
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    with TestNetwork() as network:
        zookeeper = ZooKeeperProcess(
            tmp_path / "zookeeper",
            host=network.add_host("zookeeper"),
            log_path=tmp_path / "logs" / "zookeeper.log",
        )
        hosts = {i: network.add_host(f"broker{i}") for i in range(3)}
        c = Cluster(tmp_path, 3, zookeeper=zookeeper, hosts=hosts, overrides=campaign.FAULT_CLUSTER)
        c.start()
        try:
            yield c, network
        finally:
            network.heal_all()
            c.stop()


@pytest.fixture
def slow_disk_cluster(tmp_path, zookeeper):
    """Three brokers whose log dirs are FUSE passthroughs that a nemesis can slow down
    (tests/faults/slow_disk.py; `nemesis.SlowDisk`), on the session's ZooKeeper."""
    from tests.faults import slow_disk

    reason = slow_disk.unavailable()
    if reason:
        pytest.skip(reason)
    disks = [
        slow_disk.SlowDisk(tmp_path / f"broker-{i}.backing", tmp_path / f"broker-{i}")
        for i in range(3)
    ]
    mounted = []
    try:
        for disk in disks:
            mounted.append(disk.mount())
        with Cluster(tmp_path, 3, zookeeper=zookeeper, overrides=campaign.FAULT_CLUSTER) as c:
            yield c
    finally:
        for disk in mounted:
            disk.unmount()
