"""Shared fixtures: real brokers and registries in their own processes, on free loopback
ports (`broker.processes` starts and stops them; their logs are in the tests' tmp_path)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from broker.processes import BrokerProcess, Cluster, RegistryProcess, ZooKeeperProcess
from tests.helpers.acls import authorizer_settings
from tests.helpers.cluster import NO_GROUP_DELAY


@pytest.fixture
def broker_factory(tmp_path):
    started: list[BrokerProcess] = []

    def make(
        overrides: dict[str, str] | None = None,
        log_dir: Path | None = None,
        port: int | None = None,
    ) -> BrokerProcess:
        b = BrokerProcess(log_dir or tmp_path / f"logs-{len(started)}", overrides, port=port)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.stop()


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    """Settings of the module's `broker`; a package's conftest may override this."""
    return {}


@pytest.fixture(scope="module")
def broker(tmp_path_factory, broker_overrides):
    """One broker shared by a test module (start-up is not free)."""
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "logs", broker_overrides) as b:
        yield b


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory):
    """A broker shared by a test module of consumer groups: no initial rebalance delay, so
    each test's group forms at once."""
    overrides = dict(NO_GROUP_DELAY)
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "logs", overrides) as b:
        yield b


@pytest.fixture
def acl_broker_factory(tmp_path):
    """`make(super_users="User:admin", allow_everyone=False, **overrides)`: a broker process
    with Kafka's authorizer on (tests/helpers/acls.py), stopped after the test. Over
    PLAINTEXT every client is User:ANONYMOUS; listeners that authenticate (SASL) set the
    principal their clients log in as."""
    started: list[BrokerProcess] = []

    def make(super_users: str = "User:admin", allow_everyone: bool = False, **overrides):
        settings = {
            **authorizer_settings(super_users, allow_everyone),
            **overrides,
        }
        b = BrokerProcess(tmp_path / f"acl-logs-{len(started)}", settings)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.stop()


@pytest.fixture(scope="module")
def registry(broker, tmp_path_factory):
    """A registry on the module's broker (schemas kept in its _schemas topic)."""
    with RegistryProcess(tmp_path_factory.mktemp("registry"), bootstrap=broker.bootstrap) as r:
        yield r


@pytest.fixture
def cluster_factory(zookeeper, tmp_path):
    """`make(brokers=3, **Cluster keywords)`: a started cluster of the test's own, stopped
    after the test. On the session's ZooKeeper (own chroot) unless `zookeeper=` says
    otherwise (None: one of the cluster's own, which the test may stop or kill)."""
    made: list[Cluster] = []

    def make(brokers=3, **kwargs) -> Cluster:
        kwargs.setdefault("zookeeper", zookeeper)
        c = Cluster(tmp_path / f"cluster-{len(made)}", brokers, **kwargs)
        made.append(c)
        return c.start()

    yield make
    for c in made:
        c.stop()


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """One real ZooKeeper server for the whole run; tests keep apart by chroot
    (`zk_chroot`), as clusters sharing a ZooKeeper ensemble do."""
    with ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper")) as zk:
        yield zk


@pytest.fixture
def zk_connect(zookeeper, request):
    """A `zookeeper.connect` string with a chroot of this test's own."""
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:80]
    return f"{zookeeper.connect}/{name}-{uuid.uuid4().hex[:8]}"
