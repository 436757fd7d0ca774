"""The admin client's group API and the consumer-groups tool on a cluster: groups listed
from every coordinator, and a group's coordinator followed when its broker dies."""

from __future__ import annotations

import pytest

from broker.client.admin import AdminClient
from broker.tools.consumer_groups import main
from tests.helpers.cluster import FAST_FAILOVER, create_topic, fresh

pytestmark = pytest.mark.clients


def groups_on_two_coordinators(admin: AdminClient, topic: str) -> dict[str, int]:
    """Commit-only groups (offset 1 of `topic` partition 0) until two brokers coordinate
    some: group -> coordinator."""
    made: dict[str, int] = {}
    while len(set(made.values())) < 2:
        assert len(made) < 40, f"every group on one coordinator: {made}"
        group = fresh("spread")
        admin.alter_group_offsets(group, {(topic, 0): 1}, raise_errors=True)
        made[group] = admin.coordinators.node(group)
    return made


def test_groups_are_listed_from_every_coordinator(cluster, capsys):
    topic = fresh("groups")
    create_topic(cluster, topic, partitions=1, factor=3)
    with AdminClient(cluster.bootstrap) as admin:
        made = groups_on_two_coordinators(admin, topic)
        assert set(made) <= {g.group_id for g in admin.list_groups()}
        for group, node in made.items():
            assert admin.describe_groups([group])[group].coordinator.node_id == node

    capsys.readouterr()
    assert main(["--bootstrap-server", cluster.bootstrap, "--list"]) == 0
    assert set(made) <= set(capsys.readouterr().out.split())


@pytest.mark.slow
def test_the_coordinator_is_followed_when_its_broker_dies(cluster_factory, capsys):
    cluster = cluster_factory(3, overrides=FAST_FAILOVER)
    topic = fresh("failover")
    create_topic(cluster, topic, partitions=2, factor=3)
    group = fresh("moved")
    with AdminClient(cluster.bootstrap, request_timeout_ms=60000) as admin:
        admin.alter_group_offsets(group, {(topic, 0): 3, (topic, 1): 1}, raise_errors=True)
        before = admin.coordinators.node(group)
        cluster.kill(before)
        # The cached coordinator is gone: NOT_COORDINATOR or a lost connection, then
        # FindCoordinator again until the new leader of the group's offsets partition
        # has loaded it.
        offsets = admin.list_group_offsets(group)
        assert {tp: o.offset for tp, o in offsets.items()} == {(topic, 0): 3, (topic, 1): 1}
        after = admin.coordinators.node(group)
        assert after != before
        assert admin.describe_groups([group])[group].state == "Empty"

    live = ",".join(cluster.broker(i).bootstrap for i in cluster.ids if i != before)
    capsys.readouterr()
    assert main(["--bootstrap-server", live, "--describe", "--group", group]) == 0
    rows = [line.split() for line in capsys.readouterr().out.strip().splitlines()[1:]]
    assert [(r[2], r[3]) for r in rows] == [("0", "3"), ("1", "1")]  # PARTITION, CURRENT
