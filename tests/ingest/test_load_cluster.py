"""The load end to end against a 3-broker cluster (ZooKeeper, RF=3, min.insync.replicas=2),
with the leader of a partition the load reads taken down while it runs.

- Stopped (SIGTERM: a controlled shutdown hands its leaderships over first) in the middle
  of a task's range: the first test of test_end_to_end.py (load with audit and _SUCCESS;
  output compared record by record with what was produced) runs on this module's
  fixtures. How: the task fault hook `pause-task-once` (ingest/task.py) stops the first
  task to claim it after its first chunk and says which partition it reads and its
  planned leader; the test takes that broker down and lets the task go on, which must
  then read the rest of its range from the new leader. Fetches are small
  (`fetch.max.bytes`) and batches too, so every task reads in several chunks.
- Killed (SIGKILL: the cluster notices when its ZooKeeper session ends) by the fault
  campaign's nemesis while loads run back to back under an audited producer: the
  campaign's hourly workload and checker (tests/faults/, docs/faults.md) with a fixed
  seed: the union of the loads is exactly the acknowledged records, each in its event
  hour, committed offsets never go back, the audit passes.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.client.cluster import ClusterMetadata
from broker.processes import ROOT, BrokerProcess, Cluster, RegistryProcess
from broker.util.clock import HOUR_MS
from ingest.commit import list_runs, load_manifest
from ingest.config import load_config
from ingest.job import open_root
from tests.faults import campaign
from tests.faults.nemesis import NEMESES
from tests.helpers.cluster import FAST_FAILOVER, WAIT_S, wait_for
from tests.ingest import test_end_to_end as e2e

# The e2e module's Spark (executors in processes of their own) and its fault directory.
from tests.ingest.test_end_to_end import H0, TOPICS, Traffic, faults, spark  # noqa: F401

# The registry's and the audit's topics are replicated like the data: any broker may go.
INTERNAL_TOPICS = {"_schemas": 1, "_audit": 1}


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    settings = {**FAST_FAILOVER, "default.replication.factor": "3", "min.insync.replicas": "2"}
    with Cluster(
        tmp_path_factory.mktemp("cluster"), 3, zookeeper=zookeeper, overrides=settings
    ) as c:
        yield c


@pytest.fixture(scope="module")
def registry(cluster, tmp_path_factory):
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topics(
            [NewTopic(t, n, 3) for t, n in INTERNAL_TOPICS.items()], raise_errors=True
        )
    with RegistryProcess(
        tmp_path_factory.mktemp("registry"), bootstrap=cluster.bootstrap
    ) as registry:
        yield registry


@pytest.fixture(scope="module")
def config(cluster, registry, tmp_path_factory):
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(t, n, 3) for t, n in TOPICS.items()], raise_errors=True)
    return load_config(
        ROOT / "conf" / "ingest.yaml",
        [
            f"bootstrap.servers={cluster.bootstrap}",
            f"registry.url={registry.url}",
            f"root={tmp_path_factory.mktemp('warehouse')}",
            "limits.max.records.per.task=700",  # several tasks per partition
            "fetch.max.bytes=4096",  # several fetches per task
            f"topics.whitelist={','.join(TOPICS)}",  # not the hourly workload's topic
        ],
    )


class SmallBatches(Traffic):
    # A fetch returns at least one whole batch: small batches, so small fetches.
    producer_options = {"linger_ms": 5, "batch_size": 4096}


@pytest.fixture(scope="module")
def traffic(config):
    t = SmallBatches(config)
    t.produce(H0, H0 + 3 * HOUR_MS, per_topic=1500, bad_every=97)
    return t


def in_sync(bootstrap: str) -> bool:
    """Every partition of every topic has all three replicas in its ISR."""
    with ClusterMetadata(bootstrap) as meta:
        meta.refresh()
        return all(len(p.isr) == 3 for t in meta.topics.values() for p in t.partitions.values())


@contextmanager
def leader_taken_down_mid_task(cluster, fault_dir, take_down: Callable[[BrokerProcess], object]):
    """Arm `pause-task-once`; when a task pauses, take its planned leader down with
    `take_down` and let the task go on. Yields the paused task's state (filled in once it
    paused: topic, partition, leader, read_from, position, end)."""
    trigger, paused = fault_dir / "pause-task-once", fault_dir / "task-paused"
    for f in (fault_dir / "pause-claimed", paused):
        f.unlink(missing_ok=True)
    trigger.write_text("armed")
    state: dict = {}
    failure: list[BaseException] = []
    stop = threading.Event()

    def run():
        try:
            deadline = time.monotonic() + 10 * WAIT_S
            while not paused.exists():
                if stop.is_set() or time.monotonic() > deadline:
                    return
                time.sleep(0.05)
            state.update(json.loads(paused.read_text()))
            take_down(cluster.broker(state["leader"]))
        except BaseException as exc:  # reported by the test
            failure.append(exc)
        finally:
            paused.unlink(missing_ok=True)  # the task goes on

    watcher = threading.Thread(target=run, name="take-down-leader")
    watcher.start()
    try:
        yield state
    finally:
        stop.set()
        watcher.join()
        trigger.unlink(missing_ok=True)  # never leave it armed for a later test
    if failure:
        raise failure[0]
    assert state, "no task paused: the leader was not taken down"


def assert_read_from_two_leaders(config, paused: dict) -> None:
    """The paused task's partition was planned on the broker taken down, read from it
    first, then from another broker; and the newest run committed it."""
    manifest = load_manifest(open_root(config), list_runs(open_root(config))[-1])
    (ledger,) = [
        p
        for p in manifest.partitions
        if (p.topic, p.partition) == (paused["topic"], paused["partition"])
    ]
    assert ledger.leader == paused["leader"]
    assert paused["read_from"] == [paused["leader"]]
    assert ledger.read_from[0] == paused["leader"]
    assert len(ledger.read_from) >= 2 and ledger.read_from[-1] != paused["leader"]
    assert ledger.first <= paused["position"] < paused["end"] <= ledger.next


def test_load_with_the_leader_stopped_mid_task(spark, config, traffic, cluster, faults):  # noqa: F811
    with leader_taken_down_mid_task(cluster, faults, BrokerProcess.stop) as paused:
        e2e.test_load_end_to_end(spark, config, traffic)
    assert_read_from_two_leaders(config, paused)
    cluster.restart(paused["leader"])  # back for the next test


def test_hourly_loads_with_the_leader_killed_are_exact(spark, cluster, registry, tmp_path):  # noqa: F811
    wait_for(lambda: in_sync(cluster.bootstrap), "the restarted broker back in every ISR")
    result = campaign.run_hourly(
        cluster, NEMESES["kill-leader"], 71, tmp_path, spark, fault_s=2.0,
        registry_url=registry.url,
    )  # fmt: skip
    assert result.faults == 1, result.notes
    assert result.anomalies == [], [str(a) for a in result.anomalies] + result.notes
    assert result.history.of("send", "ok") and result.history.of("load", "ok")
