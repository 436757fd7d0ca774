"""The client library's security settings under Kafka's and librdkafka's names, and
BrokerConnection running the SASL exchange (tests/security/test_sasl_client.py tests the
machine itself) against a scripted peer, in the clear and over TLS (certificates of a
test CA)."""

from __future__ import annotations

import ssl
import time

import pytest

from broker.client.connection import BrokerConnection
from broker.client.security import (
    SECURITY_CONFIG,
    SecurityConfig,
    TlsError,
    parse_jaas_config,
    split_security,
)
from broker.config.definition import ConfigError
from broker.protocol.apis import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from broker.protocol.errors import ErrorCode, SaslAuthenticationFailedError
from broker.protocol.framing import encode_response
from broker.security.scram import MECHANISMS, ScramError, ScramServer, make_credential
from tests.client.test_client_connection import OUR_RANGES, ScriptedBroker, api_versions_answer
from tests.helpers.certs import TestCA
from tests.security.test_sasl_client import auth_failed, auth_ok, handshake_ok


def sasl(mechanism: str, user: str = "alice", password: str = "alice-secret") -> SecurityConfig:
    return SecurityConfig(
        "SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=password,
    )


# -- settings --


def test_security_config_checks_its_settings_and_hides_secrets():
    with pytest.raises(ConfigError, match="security.protocol"):
        SecurityConfig("TLS")
    with pytest.raises(ConfigError, match="sasl.mechanism"):
        SecurityConfig("SASL_SSL", sasl_mechanism="GSSAPI")
    with pytest.raises(ConfigError, match="sasl.username"):
        SecurityConfig("SASL_SSL", sasl_mechanism="PLAIN")
    shown = repr(sasl("PLAIN", password="hunter2"))
    assert "hunter2" not in shown and "alice" in shown


def test_librdkafka_names():
    security, rest = split_security({
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": "s3cret",
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
    })  # fmt: skip
    assert rest == {"bootstrap.servers": "b:9092"}
    assert security == SecurityConfig(
        "SASL_SSL",
        ssl_cafile="/etc/ca.pem",
        ssl_check_hostname=False,
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="alice",
        sasl_plain_password="s3cret",
    )


def test_java_names_and_jaas_config():
    security, _ = split_security({
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="alice" password="pa ss\\"word";',
        "ssl.truststore.location": "/etc/ca.pem",
    })  # fmt: skip
    assert (security.sasl_plain_username, security.sasl_plain_password) == ("alice", 'pa ss"word')
    assert security.ssl_cafile == "/etc/ca.pem" and security.ssl_check_hostname
    assert parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required username=bob password=x"
    ) == ("bob", "x")
    with pytest.raises(ConfigError, match="sasl.jaas.config"):
        parse_jaas_config("com.sun.security.auth.module.Krb5LoginModule required;")
    with pytest.raises(ConfigError, match="sasl.mechanism"):
        split_security({"sasl.mechanism": "GSSAPI"})
    assert split_security({})[0] == SecurityConfig()
    assert "sasl.jaas.config" in SECURITY_CONFIG.to_markdown()


# -- BrokerConnection runs the exchange on connect and before the session ends --


class SaslPeer:
    """Answers ApiVersions, SaslHandshake and SaslAuthenticate with a real ScramServer;
    Metadata with an empty cluster. Session lifetime as given."""

    def __init__(
        self, credential, lifetime_ms: int = 0, mechanism: str = "SCRAM-SHA-256", tls=None
    ):
        self.mech = MECHANISMS[mechanism]
        self.credential = credential
        self.lifetime_ms = lifetime_ms
        self.server: ScramServer | None = None
        self.authentications = 0
        self.broker = ScriptedBroker(self.answer, tls)

    def answer(self, header, body):
        if header.api_key == API_VERSIONS:
            return api_versions_answer(header, {**OUR_RANGES, 17: (0, 1), 36: (0, 2)})
        if header.api_key == SASL_HANDSHAKE:
            self.server = ScramServer(self.mech, {"alice": self.credential}.get)
            reply = handshake_ok([self.mech.name])
        elif header.api_key == SASL_AUTHENTICATE:
            try:
                token = self.server.receive(body["auth_bytes"])
            except ScramError as exc:
                reply = auth_failed(str(exc))
            else:
                self.authentications += self.server.complete
                reply = auth_ok(token, self.lifetime_ms if self.server.complete else 0)
        else:
            reply = {"brokers": [], "topics": [], "cluster_id": "c", "controller_id": -1}
        return encode_response(header.api_key, header.api_version, header.correlation_id, reply)


def test_connection_authenticates_before_its_first_request():
    peer = SaslPeer(make_credential(MECHANISMS["SCRAM-SHA-256"], "alice-secret"))
    try:
        with BrokerConnection(
            "127.0.0.1", peer.broker.port, security=sasl("SCRAM-SHA-256")
        ) as conn:
            assert conn.request(3, {"topics": []})["cluster_id"] == "c"
        assert [h.api_key for h in peer.broker.requests] == [18, 17, 36, 36, 3]
        assert [h.api_version for h in peer.broker.requests][1:4] == [1, 2, 2]
        assert peer.authentications == 1
    finally:
        peer.broker.close()


def test_connection_authenticates_again_before_the_session_ends():
    peer = SaslPeer(make_credential(MECHANISMS["SCRAM-SHA-256"], "alice-secret"), lifetime_ms=1)
    try:
        with BrokerConnection(
            "127.0.0.1", peer.broker.port, security=sasl("SCRAM-SHA-256")
        ) as conn:
            cid = conn.send(3, {"topics": []})
            time.sleep(0.01)  # past 85% of the 1 ms session: the next send authenticates first
            assert conn.request(3, {"topics": []})["cluster_id"] == "c"
            assert conn.receive(cid)["cluster_id"] == "c"  # read and kept on the way
        assert [h.api_key for h in peer.broker.requests] == [18, 17, 36, 36, 3, 17, 36, 36, 3]
        assert peer.authentications == 2
    finally:
        peer.broker.close()


def test_a_refused_login_fails_the_connection_with_the_brokers_message():
    peer = SaslPeer(make_credential(MECHANISMS["SCRAM-SHA-256"], "alice-secret"))
    try:
        with pytest.raises(SaslAuthenticationFailedError, match="invalid credentials"):
            BrokerConnection(
                "127.0.0.1", peer.broker.port, security=sasl("SCRAM-SHA-256", password="nope")
            )
    finally:
        peer.broker.close()


def test_a_listener_without_sasl_is_a_clear_error():
    broker = ScriptedBroker(lambda header, body: api_versions_answer(header, OUR_RANGES))
    try:
        with pytest.raises(Exception, match="does not offer SaslAuthenticate"):
            BrokerConnection("127.0.0.1", broker.port, security=sasl("PLAIN"))
    finally:
        broker.close()
    assert ErrorCode.SASL_AUTHENTICATION_FAILED.retriable is False


@pytest.fixture
def server_tls(tmp_path):
    ca = TestCA(tmp_path / "ca")
    issued = ca.issue("broker", hosts=["127.0.0.1", "localhost"])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(issued.keystore)
    return ca, context


def test_sasl_over_tls(server_tls):
    ca, context = server_tls
    peer = SaslPeer(make_credential(MECHANISMS["SCRAM-SHA-512"], "pw"), 0, "SCRAM-SHA-512", context)
    security = SecurityConfig(
        "SASL_SSL",
        ssl_cafile=str(ca.pem),
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="alice",
        sasl_plain_password="pw",
    )
    try:
        with BrokerConnection("127.0.0.1", peer.broker.port, security=security) as conn:
            assert isinstance(conn._sock, ssl.SSLSocket)
            assert conn.request(3, {"topics": []})["cluster_id"] == "c"
        assert peer.authentications == 1
    finally:
        peer.broker.close()


def test_a_certificate_of_another_ca_is_refused_at_once(server_tls, tmp_path):
    _, context = server_tls
    stranger = TestCA(tmp_path / "other", "Other CA")
    peer = SaslPeer(make_credential(MECHANISMS["SCRAM-SHA-256"], "pw"), tls=context)
    try:
        with pytest.raises(TlsError, match="TLS with 127.0.0.1") as refused:
            BrokerConnection(
                "127.0.0.1",
                peer.broker.port,
                security=SecurityConfig("SSL", ssl_cafile=str(stranger.pem)),
            )
        assert not refused.value.retriable
        assert peer.broker.requests == []
    finally:
        peer.broker.close()
