"""A cluster whose only listener is SASL_SSL: SCRAM-SHA-512 for clients and between the
brokers (they log in as `broker`), certificates from a test CA, users from a credentials
file. Shared by the tests that need a secured cluster (replication, the secured load)."""

from __future__ import annotations

import json
from pathlib import Path

from broker.client.security import SecurityConfig
from broker.processes import Cluster
from broker.security.credentials import user_entry
from broker.security.scram import MECHANISMS, make_credential
from tests.helpers.certs import TestCA

SCRAM = "SCRAM-SHA-512"
BROKER_USER = "broker"


def sasl_ssl_cluster(
    work: Path, zookeeper, passwords: dict[str, str], overrides: dict[str, str] | None = None
) -> tuple[Cluster, TestCA]:
    """Three brokers (not started) with one listener, SECURE, SASL_SSL; `passwords` (user ->
    password) must name BROKER_USER. Readiness is left to the caller, over SASL_SSL."""
    ca = TestCA(work / "ca")
    keystore = ca.issue("broker", hosts=["127.0.0.1", "localhost"]).keystore
    credentials = work / "scram.json"
    credentials.write_text(
        json.dumps(
            {
                user: user_entry({SCRAM: make_credential(MECHANISMS[SCRAM], password)})
                for user, password in passwords.items()
            }
        )
    )
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{BROKER_USER}" password="{passwords[BROKER_USER]}";'
    )
    cluster = Cluster(
        work / "cluster",
        3,
        zookeeper=zookeeper,
        overrides={
            "listener.security.protocol.map": "SECURE:SASL_SSL",
            "inter.broker.listener.name": "SECURE",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.location": str(ca.pem),
            "sasl.enabled.mechanisms": SCRAM,
            "sasl.mechanism.inter.broker.protocol": SCRAM,
            "listener.name.secure.scram-sha-512.sasl.jaas.config": jaas,
            "sasl.scram.credentials.file": str(credentials),
            **(overrides or {}),
        },
    )
    for b in cluster.brokers:
        b.overrides["listeners"] = f"SECURE://127.0.0.1:{b.port}"
    cluster.wait_for_registration = False
    return cluster, ca


def client_security(ca: TestCA, user: str, password: str) -> SecurityConfig:
    """Our client library's settings for `user` on such a cluster."""
    return SecurityConfig(
        "SASL_SSL",
        ssl_cafile=str(ca.pem),
        sasl_mechanism=SCRAM,
        sasl_plain_username=user,
        sasl_plain_password=password,
    )
