"""Our client library, tools and registry store against a broker process serving SASL_SSL
(SCRAM-SHA-512 from the credentials file, PLAIN from JAAS) and SSL with client
certificates: produce, fetch, admin and a group over each; a wrong password raised at
once with the broker's message; re-authentication within a short session lifetime;
SCRAM users created through the broker (AlterUserScramCredentials into the credentials
file) logging in right after; kafka-configs and the registry's store with the same
settings from properties files."""

from __future__ import annotations

import time
import uuid

import pytest

from broker.client.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    UserScramCredentialUpsertion,
)
from broker.client.group import GroupConsumer
from broker.client.producer import Producer
from broker.client.security import SecurityConfig, split_security
from broker.client.simple_consumer import SimpleConsumer
from broker.protocol.errors import ErrorCode, SaslAuthenticationFailedError
from broker.tools import configs
from schemas.store import KafkaTopicStore
from tests.security.test_clients import PASSWORDS, USERS, WRONG, SecureBroker


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    # Sessions of 3 s: every test here outlives several, so connections re-authenticate.
    b = SecureBroker(tmp_path_factory.mktemp("secure"), **{"connections.max.reauth.ms": "3000"})
    with b.process:
        yield b


def sasl(secure: SecureBroker, mechanism: str = "SCRAM-SHA-512", user=None, password=None):
    user = user or USERS[mechanism]
    return SecurityConfig(
        "SASL_SSL",
        ssl_cafile=str(secure.ca.pem),
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=password or PASSWORDS[user],
    )


def tls(secure: SecureBroker) -> SecurityConfig:
    cert = secure.client_cert
    return SecurityConfig(
        "SSL", ssl_cafile=str(secure.ca.pem), ssl_certfile=str(cert.cert), ssl_keyfile=str(cert.key)
    )


def bootstrap(secure: SecureBroker, security: SecurityConfig) -> str:
    port = secure.sasl_port if security.uses_sasl else secure.ssl_port
    return f"127.0.0.1:{port}"


def round_trip(address: str, security: SecurityConfig, count: int = 10) -> list[bytes]:
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    with AdminClient(address, security=security) as admin:
        assert admin.create_topics([NewTopic(topic, 1)]) == {topic: ErrorCode.NONE}
    with Producer(address, security=security, linger_ms=0) as producer:
        futures = [producer.send(topic, f"v{i}".encode(), partition=0) for i in range(count)]
        for future in futures:
            future.result(30)
    with SimpleConsumer(address, security=security) as consumer:
        result = consumer.fetch(topic, 0, 0)
        return [r.value for r in result.records()]


@pytest.mark.parametrize("which", ["SCRAM-SHA-512", "PLAIN", "SSL"])
def test_produce_fetch_and_admin(secure, which):
    security = tls(secure) if which == "SSL" else sasl(secure, which)
    values = round_trip(bootstrap(secure, security), security)
    assert values == [f"v{i}".encode() for i in range(10)]


def test_a_group_consumer_over_sasl_ssl(secure):
    security = sasl(secure)
    address = bootstrap(secure, security)
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    with AdminClient(address, security=security) as admin:
        admin.create_topics([NewTopic(topic, 2)], raise_errors=True)
    with Producer(address, security=security, linger_ms=0) as producer:
        for i in range(6):
            producer.send(topic, b"g%d" % i, partition=i % 2).result(30)
    consumer = GroupConsumer(address, security, group_id="g-" + topic, auto_offset_reset="earliest")
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 6 and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(1.0)]
        consumer.commit()
    finally:
        consumer.close()
    assert sorted(got) == [b"g%d" % i for i in range(6)]


def test_a_wrong_password_is_raised_at_once_with_the_brokers_message(secure):
    security = sasl(secure, password=WRONG)
    began = time.monotonic()
    with pytest.raises(SaslAuthenticationFailedError, match="Authentication failed"):
        AdminClient(bootstrap(secure, security), security=security, request_timeout_ms=120_000)
    # Not retried until the two-minute timeout: the first refusal is the answer.
    assert time.monotonic() - began < 60


def test_connections_reauthenticate_before_their_session_ends(secure):
    security = sasl(secure)
    address = bootstrap(secure, security)
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    with AdminClient(address, security=security) as admin:
        admin.create_topics([NewTopic(topic, 1)], raise_errors=True)
    with Producer(address, security=security, linger_ms=0) as producer:
        producer.send(topic, b"before", partition=0).result(30)
        connections = dict(producer.cluster._conns)
        time.sleep(4)  # past the 3 s session: the next request authenticates again first
        producer.send(topic, b"after", partition=0).result(30)
        # The same connections carried on: re-authenticated, not closed and reopened.
        assert {n: c for n, c in producer.cluster._conns.items() if n in connections} == connections
        assert not any(c.closed for c in connections.values())
    assert "expired without re-authentication" not in secure.process.log_text()


def test_users_created_through_the_broker_log_in(secure):
    admin_security = sasl(secure)
    address = bootstrap(secure, admin_security)
    user = f"carol-{uuid.uuid4().hex[:6]}"
    with AdminClient(address, security=admin_security) as admin:
        outcome = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(user, "SCRAM-SHA-512", "carol-pw-1", 8192)]
        )
        assert outcome == {user: ErrorCode.NONE}
        assert admin.describe_user_scram_credentials([user]) == {
            user: [ScramCredentialInfo("SCRAM-SHA-512", 8192)]
        }
    carol = sasl(secure, user=user, password="carol-pw-1")
    assert round_trip(address, carol, 3) == [b"v0", b"v1", b"v2"]
    with pytest.raises(SaslAuthenticationFailedError):
        SimpleConsumer(address, security=sasl(secure, user=user, password=WRONG))


def test_configs_tool_with_a_command_config(secure, tmp_path, capsys):
    properties = tmp_path / "admin.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="alice" password="{PASSWORDS["alice"]}";\n'
        f"ssl.truststore.location={secure.ca.pem}\n"
    )
    user = f"dave-{uuid.uuid4().hex[:6]}"
    base = [
        "--bootstrap-server",
        f"127.0.0.1:{secure.sasl_port}",
        "--command-config",
        str(properties),
        "--entity-type",
        "users",
    ]
    add = ["--alter", "--entity-name", user, "--add-config", "SCRAM-SHA-512=[password=dave-pw]"]
    assert configs.main([*base, *add]) == 0
    assert configs.main([*base, "--describe", "--entity-name", user]) == 0
    out = capsys.readouterr().out
    assert f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-512" in out
    assert "dave-pw" not in out


def test_the_registry_store_over_sasl_ssl(secure, tmp_path):
    security, _ = split_security(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "bob",
            "sasl.password": PASSWORDS["bob"],
            "ssl.ca.location": str(secure.ca.pem),
        }
    )
    topic = f"_schemas_{uuid.uuid4().hex[:6]}"
    address = f"127.0.0.1:{secure.sasl_port}"
    store = KafkaTopicStore(address, topic, replication_factor=1, security=security)
    try:
        store.append({"keytype": "NOOP", "magic": 0}, {"n": 1})
    finally:
        store.close()
    replayed = KafkaTopicStore(address, topic, security=security)
    assert list(replayed.replay()) == [({"keytype": "NOOP", "magic": 0}, {"n": 1})]
