"""The whole load against a secured deployment: a three-broker cluster whose only listener
is SASL_SSL (SCRAM-SHA-512, inter-broker traffic too) with ACLs enforced, and the schema
registry behind HTTPS and basic authentication, keeping its store over SASL_SSL.

Every party has its own principal and only the ACLs it needs: the producing application
writes its topics and the audit topic; the loader reads them (and writes the audit
topic's loaded counts); the registry owns `_schemas`. The load is the same end-to-end test
as on a plaintext broker (output compared record by record, audit complete, _SUCCESS);
then, with the loader's Read on one topic taken away (Describe left, so the topic is still
visible: without it the topic is hidden from the loader, as Kafka hides it), a load fails
naming the refusal and commits nothing; and the status command, run as the operator, sees
the secured cluster and registry.

Two config dicts: the loader's (`config`), and the operator's for `status`."""

from __future__ import annotations

import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.client.security import SecurityConfig
from broker.processes import ROOT, RegistryProcess
from broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    Permission,
    ResourcePattern,
    ResourceType,
)
from broker.util.clock import HOUR_MS
from ingest.commit import list_runs
from ingest.config import load_config
from ingest.job import open_root, run_load
from schemas.audited_producer import AuditedProducer
from schemas.client import RegistryClient
from tests.helpers.cluster import FAST_FAILOVER, NO_GROUP_DELAY, wait_for
from tests.helpers.secure_cluster import SCRAM, client_security, sasl_ssl_cluster
from tests.ingest import test_end_to_end as e2e
from tests.ingest.test_end_to_end import H0, TOPICS, Traffic, faults, spark  # noqa: F401

pytestmark = pytest.mark.slow

PASSWORDS = {
    "broker": "broker-pw-5e1",
    "admin": "admin-pw-0c3",
    "frontend": "frontend-pw-9a7",
    "loader": "loader-pw-2f8",
    "registry": "registry-pw-71b",
}
REGISTRY_PASSWORDS = {"frontend": "frontend-http-pw-4d2", "loader": "loader-http-pw-8e6"}
AUDIT_TOPIC = "_audit"


def _user(name: str) -> str:
    return f"User:{name}"


def _allow(principal: str, kind: ResourceType, name: str, *operations: Operation) -> list:
    return [
        AclBinding(
            ResourcePattern(kind, name),
            AccessControlEntry(_user(principal), "*", op, Permission.ALLOW),
        )
        for op in operations
    ]


@pytest.fixture(scope="module")
def deployment(zookeeper, tmp_path_factory):
    work = tmp_path_factory.mktemp("secured")
    cluster, ca = sasl_ssl_cluster(
        work,
        zookeeper,
        PASSWORDS,
        {
            **FAST_FAILOVER,
            **NO_GROUP_DELAY,  # the registry's election: its only group
            "default.replication.factor": "3",
            "min.insync.replicas": "2",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:broker;User:admin",
        },
    )

    def security(user: str) -> SecurityConfig:
        return client_security(ca, user, PASSWORDS[user])

    with cluster:
        admin = AdminClient(cluster.bootstrap, security=security("admin"))
        with admin:
            wait_for(lambda: len(admin.describe_cluster().brokers) == 3, "three brokers")
            topics = {**TOPICS, AUDIT_TOPIC: 1, "_schemas": 1}
            admin.create_topics([NewTopic(t, n, 3) for t, n in topics.items()], raise_errors=True)
            acls = [
                *_allow("registry", ResourceType.TOPIC, "_schemas", Operation.ALL),
                *_allow("registry", ResourceType.GROUP, "schema-registry", Operation.ALL),
                *_allow(
                    "registry", ResourceType.CLUSTER, "kafka-cluster", Operation.IDEMPOTENT_WRITE
                ),
                *_allow(
                    "frontend", ResourceType.CLUSTER, "kafka-cluster", Operation.IDEMPOTENT_WRITE
                ),
                *_allow(
                    "loader", ResourceType.CLUSTER, "kafka-cluster", Operation.IDEMPOTENT_WRITE
                ),
                *_allow("frontend", ResourceType.TOPIC, AUDIT_TOPIC, Operation.WRITE),
                *_allow("loader", ResourceType.TOPIC, AUDIT_TOPIC, Operation.READ, Operation.WRITE),
            ]
            for topic in TOPICS:
                acls += _allow("frontend", ResourceType.TOPIC, topic, Operation.WRITE)
                acls += _allow("loader", ResourceType.TOPIC, topic, Operation.READ)
            admin.create_acls(acls, raise_errors=True)
        users = work / "registry-users"
        users.write_text("")
        for user, password in REGISTRY_PASSWORDS.items():
            e2e_passwd(users, user, password)
        registry_keystore = ca.issue("registry", hosts=["127.0.0.1", "localhost"]).keystore
        settings = {
            "ssl.keystore.location": str(registry_keystore),
            "authentication.method": "BASIC",
            "authentication.users.file": str(users),
            "kafkastore.security.protocol": "SASL_SSL",
            "kafkastore.sasl.mechanism": SCRAM,
            "kafkastore.sasl.username": "registry",
            "kafkastore.sasl.password": PASSWORDS["registry"],
            "kafkastore.ssl.ca.location": str(ca.pem),
        }
        with RegistryProcess(work, bootstrap=cluster.bootstrap, settings=settings) as registry:
            yield cluster, registry, ca, security


def e2e_passwd(users, user: str, password: str) -> None:
    from schemas.registry.auth import user_line

    with users.open("a") as f:
        f.write(user_line(user, password, ["developer"], iterations=1000) + "\n")


@pytest.fixture(scope="module")
def config(deployment, tmp_path_factory):
    cluster, registry, ca, _ = deployment
    return load_config(
        ROOT / "conf" / "ingest.yaml",
        [
            f"bootstrap.servers={cluster.bootstrap}",
            f"registry.url={registry.url}",
            f"registry.ssl.ca.location={ca.pem}",
            f"root={tmp_path_factory.mktemp('warehouse')}",
            "kafka.security.protocol=SASL_SSL",
            f"kafka.sasl.mechanism={SCRAM}",
            "kafka.sasl.username=loader",
            f"kafka.ssl.ca.location={ca.pem}",
            "limits.max.records.per.task=700",
        ],
        secrets={
            "kafka.sasl.password": PASSWORDS["loader"],
            "registry.basic.auth.user.info": f"loader:{REGISTRY_PASSWORDS['loader']}",
        },
    )


class FrontendTraffic(Traffic):
    """Produced by the application's own principal, registering through its own login."""

    def __init__(self, config, deployment) -> None:
        super().__init__(config)
        self.deployment = deployment

    def producer(self) -> AuditedProducer:
        cluster, registry, ca, security = self.deployment
        client = RegistryClient(
            registry.url,
            basic_auth_user_info=f"frontend:{REGISTRY_PASSWORDS['frontend']}",
            ssl_ca_location=str(ca.pem),
        )
        return AuditedProducer(
            cluster.bootstrap,
            registry=client,
            service="e2e",
            emit_interval_s=None,
            security=security("frontend"),
            **self.producer_options,
        )


@pytest.fixture(scope="module")
def traffic(config, deployment):
    t = FrontendTraffic(config, deployment)
    t.produce(H0, H0 + 3 * HOUR_MS, per_topic=600, bad_every=97)
    return t


def test_the_load_end_to_end_over_sasl_ssl_with_acls(spark, config, traffic):  # noqa: F811
    e2e.test_load_end_to_end(spark, config, traffic)


def test_a_load_without_read_on_a_topic_fails_clearly_and_commits_nothing(
    spark,  # noqa: F811
    config,
    traffic,
    deployment,
):
    cluster, _, _, security = deployment
    traffic.produce(H0, H0 + 3 * HOUR_MS, per_topic=50)  # something new to load
    runs_before = list_runs(open_root(config))
    read_clicks = AclBindingFilter(
        ResourceType.TOPIC, "clicks", principal=_user("loader"), operation=Operation.READ
    )
    describe_clicks = _allow("loader", ResourceType.TOPIC, "clicks", Operation.DESCRIBE)
    with AdminClient(cluster.bootstrap, security=security("admin")) as admin:
        admin.create_acls(describe_clicks, raise_errors=True)
        (removed,) = admin.delete_acls([read_clicks], raise_errors=True)
        assert len(removed) == 1
        try:
            with pytest.raises(Exception, match="(?i)authoriz") as failure:
                run_load(config, spark=spark, show_progress=False)
            assert "clicks" in str(failure.value)
        finally:
            admin.create_acls(
                _allow("loader", ResourceType.TOPIC, "clicks", Operation.READ), raise_errors=True
            )
    assert list_runs(open_root(config)) == runs_before


def test_status_sees_the_secured_cluster_and_registry(deployment, config):
    from ingest import status

    cluster, registry, ca, _ = deployment
    operator = load_config(
        ROOT / "conf" / "ingest.yaml",
        [
            f"bootstrap.servers={cluster.bootstrap}",
            f"registry.url={registry.url}",
            f"registry.ssl.ca.location={ca.pem}",
            f"root={config['root']}",
            "kafka.security.protocol=SASL_SSL",
            f"kafka.sasl.mechanism={SCRAM}",
            "kafka.sasl.username=admin",
            f"kafka.ssl.ca.location={ca.pem}",
        ],
        secrets={
            "kafka.sasl.password": PASSWORDS["admin"],
            "registry.basic.auth.user.info": f"loader:{REGISTRY_PASSWORDS['loader']}",
        },
    )
    sections = {s.title: s for s in status.gather(operator, open_root(operator))}
    brokers = sections["brokers"].lines[0]
    assert brokers.level == status.OK and brokers.text.startswith("3 broker(s)"), brokers
    (registry_line,) = sections["schema registry"].lines
    assert registry_line.level == status.OK and ": leader," in registry_line.text, registry_line
