"""The pieces under the listeners: principal mapping rules, JAAS configs, the credentials
file, the listener keys' checks and the TLS contexts built from them."""

from __future__ import annotations

import json
import ssl

import pytest

from broker.config.server import BrokerConfig, ConfigError
from broker.security.credentials import Credentials, user_entry
from broker.security.jaas import parse_jaas
from broker.security.listener import listener_security
from broker.security.principal import NoMatchingRule, PrincipalMapper, subject_name
from broker.security.scram import MECHANISMS, ScramError, make_credential
from tests.helpers.certs import TestCA

SUBJECT = "CN=alice,OU=ServiceUsers,O=corp,C=DE"


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ("DEFAULT", f"User:{SUBJECT}"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "User:alice"),
        ("RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/U", "User:ALICE@SERVICEUSERS"),
        ("RULE:^CN=(.*?),OU=Admins.*$/$1/, RULE:^CN=(.*?),.*$/svc-$1/L", "User:svc-alice"),
        ("RULE:^CN=(.*?),OU=Admins.*$/$1/,DEFAULT", f"User:{SUBJECT}"),
    ],
)
def test_principal_mapping_rules(rules, expected):
    assert PrincipalMapper(rules).principal(SUBJECT) == expected


def test_no_matching_rule_refuses():
    with pytest.raises(NoMatchingRule):
        PrincipalMapper("RULE:^CN=bob$/$1/").principal(SUBJECT)


def test_bad_rules_stop_the_start(tmp_path):
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules"):
        BrokerConfig.from_mapping(
            {"log.dirs": str(tmp_path), "ssl.principal.mapping.rules": "RULE:nope"}
        )


def test_subject_name_is_rfc2253_from_getpeercert():
    subject = (
        (("countryName", "DE"),),
        (("organizationName", "corp, inc"),),
        (("commonName", "alice"),),
    )
    assert subject_name(subject) == "CN=alice,O=corp\\, inc,C=DE"


def test_jaas_config_options_and_users():
    jaas = parse_jaas(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="a\\"b" user_admin="a\\"b" user_bob=bob-secret;'
    )
    assert jaas.login_module.endswith("PlainLoginModule")
    assert (jaas.username, jaas.password) == ("admin", 'a"b')
    assert jaas.users() == {"admin": 'a"b', "bob": "bob-secret"}


def test_a_bad_jaas_config_is_named_without_its_passwords(tmp_path):
    cfg = BrokerConfig.from_mapping(
        {
            "log.dirs": str(tmp_path),
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.jaas.config": 'PlainLoginModule user_bob="s3cret',
        }
    )
    with pytest.raises(ConfigError) as failed:
        listener_security(cfg, "SASL_PLAINTEXT", Credentials())
    assert "sasl.jaas.config" in str(failed.value)
    assert "s3cret" not in str(failed.value)


def test_credentials_file_read_replace_and_reread(tmp_path):
    path = tmp_path / "scram.json"
    sha256 = make_credential(MECHANISMS["SCRAM-SHA-256"], "pw", iterations=4096)
    path.write_text(json.dumps({"alice": user_entry({"SCRAM-SHA-256": sha256})}))
    credentials = Credentials(path)
    assert credentials.scram("alice", "SCRAM-SHA-256") == sha256
    assert credentials.scram("alice", "SCRAM-SHA-512") is None
    assert credentials.scram("bob", "SCRAM-SHA-256") is None

    sha512 = make_credential(MECHANISMS["SCRAM-SHA-512"], "pw")
    credentials.replace("bob", {"SCRAM-SHA-512": sha512})
    on_disk = json.loads(path.read_text())
    assert on_disk["bob"] == {"version": 1, "config": {"SCRAM-SHA-512": sha512.to_config()}}
    assert Credentials(path).scram("bob", "SCRAM-SHA-512") == sha512

    credentials.replace("alice", {})
    assert "alice" not in json.loads(path.read_text())

    # Written by someone else (an operator's edit): read again at the next lookup.
    other = Credentials(path)
    other.replace("carol", {"SCRAM-SHA-256": sha256})
    assert credentials.scram("carol", "SCRAM-SHA-256") == sha256


def test_a_half_written_credentials_file_keeps_what_was_read(tmp_path):
    path = tmp_path / "scram.json"
    cred = make_credential(MECHANISMS["SCRAM-SHA-256"], "pw")
    path.write_text(json.dumps({"alice": user_entry({"SCRAM-SHA-256": cred})}))
    credentials = Credentials(path)
    path.write_text('{"alice": ')
    assert credentials.scram("alice", "SCRAM-SHA-256") == cred


def test_a_broken_credentials_file_stops_the_start(tmp_path):
    path = tmp_path / "scram.json"
    path.write_text(json.dumps({"alice": {"version": 1, "config": {"SCRAM-SHA-256": "salt=%"}}}))
    with pytest.raises(ScramError, match="alice"):
        Credentials(path)


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"listeners": "INTERNAL://127.0.0.1:0"}, "listener.security.protocol.map"),
        ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "'TLS'"),
        ({"listeners": "SSL://127.0.0.1:0"}, "ssl.keystore.location"),
        (
            {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": "/nonexistent.pem"},
            "/nonexistent.pem",
        ),
        ({"inter.broker.listener.name": "OTHER"}, "inter.broker.listener.name"),
        ({"listener.name.plaintext.ssl.client.auth": "maybe"}, "maybe"),
        ({"listener.name.plaintext.ssl.foo": "1"}, "listener.name.plaintext.ssl.foo"),
        ({"listener.name.other.ssl.client.auth": "none"}, "OTHER"),
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI"),
        ({"ssl.enabled.protocols": "TLSv1.1"}, "TLSv1.1"),
        ({"listeners": "PLAINTEXT://:0,PLAINTEXT://:1"}, "once"),
    ],
)
def test_bad_listener_settings_stop_the_start_naming_key_and_value(tmp_path, raw, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        BrokerConfig.from_mapping({"log.dirs": str(tmp_path), **raw})


def test_listener_overrides_win_over_the_broker_keys(tmp_path):
    ca = TestCA(tmp_path / "ca")
    a, b = ca.issue("a", hosts=["127.0.0.1"]), ca.issue("b", hosts=["127.0.0.1"])
    cfg = BrokerConfig.from_mapping(
        {
            "log.dirs": str(tmp_path),
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SASL_SSL",
            "ssl.keystore.location": str(a.keystore),
            "listener.name.internal.ssl.keystore.location": str(b.keystore),
            "listener.name.internal.ssl.client.auth": "required",
            "listener.name.internal.ssl.truststore.location": str(ca.pem),
            "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        }
    )
    assert cfg.security_protocol("INTERNAL") == "SASL_SSL"
    assert cfg.listener_value("INTERNAL", "ssl.keystore.location") == str(b.keystore)
    assert cfg.listener_value("SSL", "ssl.keystore.location") == str(a.keystore)
    internal = listener_security(cfg, "INTERNAL", Credentials())
    assert internal.ssl.verify_mode == ssl.CERT_REQUIRED
    assert internal.ssl.minimum_version == ssl.TLSVersion.TLSv1_2
    assert internal.sasl.mechanisms == ["SCRAM-SHA-512"]
    plain_tls = listener_security(cfg, "SSL", Credentials())
    assert plain_tls.ssl.verify_mode == ssl.CERT_NONE and plain_tls.sasl is None
    assert listener_security(cfg, "PLAINTEXT", Credentials()).ssl is None


def test_an_encrypted_key_needs_its_password(tmp_path):
    ca = TestCA(tmp_path / "ca")
    issued = ca.issue("broker", hosts=["127.0.0.1"], password="key-secret")
    base = {
        "log.dirs": str(tmp_path),
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.location": str(issued.keystore),
    }
    with pytest.raises(ConfigError, match="ssl.keystore.location"):
        listener_security(BrokerConfig.from_mapping(base), "SSL", Credentials())
    good = BrokerConfig.from_mapping({**base, "ssl.key.password": "key-secret"})
    assert listener_security(good, "SSL", Credentials()).ssl is not None


def test_inline_pem_key_store_and_trust_store(tmp_path):
    """Kafka's inline PEM: ssl.keystore.key + ssl.keystore.certificate.chain and
    ssl.truststore.certificates, as text instead of files."""
    ca = TestCA(tmp_path / "ca")
    issued = ca.issue("broker", hosts=["127.0.0.1"])
    chain = issued.keystore.read_text().split("-----END PRIVATE KEY-----\n", 1)[1]
    base = {
        "log.dirs": str(tmp_path),
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.key": issued.key.read_text(),
        "ssl.client.auth": "required",
    }
    with pytest.raises(ConfigError, match="needs both ssl.keystore.key"):
        BrokerConfig.from_mapping(base)
    cfg = BrokerConfig.from_mapping(
        {
            **base,
            "ssl.keystore.certificate.chain": chain,
            "ssl.truststore.certificates": ca.pem.read_text(),
        }
    )
    context = listener_security(cfg, "SSL", Credentials()).ssl
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert [c["subject"] for c in context.get_ca_certs()] == [
        ((("organizationName", "kafka-hourly tests"),), (("commonName", "Test CA"),))
    ]
    broken = BrokerConfig.from_mapping({**base, "ssl.keystore.certificate.chain": "junk"})
    with pytest.raises(ConfigError, match=r"\(inline PEM\) for configuration ssl.keystore.key"):
        listener_security(broken, "SSL", Credentials())


def test_inter_broker_hostname_check_follows_endpoint_identification(tmp_path):
    from broker.security.tls import client_context

    ca = TestCA(tmp_path / "ca")
    issued = ca.issue("broker", hosts=["127.0.0.1"])
    settings = {
        "ssl.enabled.protocols": ["TLSv1.2", "TLSv1.3"],
        "ssl.keystore.location": str(issued.keystore),
        "ssl.truststore.location": str(ca.pem),
        "ssl.endpoint.identification.algorithm": "https",
    }
    value = {**dict.fromkeys(["ssl.keystore.key", "ssl.keystore.certificate.chain",
                              "ssl.truststore.certificates", "ssl.key.password"]), **settings}  # fmt: skip
    assert client_context(value.get).check_hostname
    value["ssl.endpoint.identification.algorithm"] = ""
    assert not client_context(value.get).check_hostname


def test_a_bad_trust_store_is_named(tmp_path):
    ca = TestCA(tmp_path / "ca")
    issued = ca.issue("broker", hosts=["127.0.0.1"])
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    base = {
        "log.dirs": str(tmp_path),
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.location": str(issued.keystore),
        "ssl.client.auth": "required",
    }
    for key, value, shown in [
        ("ssl.truststore.location", str(junk), str(junk)),
        ("ssl.truststore.certificates", "junk", "(inline PEM)"),
    ]:
        cfg = BrokerConfig.from_mapping({**base, key: value})
        with pytest.raises(ConfigError, match=f"{shown}.*{key}"):
            listener_security(cfg, "SSL", Credentials())
