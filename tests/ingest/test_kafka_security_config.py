"""The load's `kafka:` security settings: one SecurityConfig from conf/ingest.yaml's keys
(the clients' table, prefixed), secrets only from the environment, errors naming the
load's own key."""

from __future__ import annotations

import pickle

import pytest

from broker.client.security import SecurityConfig
from broker.config.definition import ConfigError
from ingest.config import kafka_security, load_config, secrets_from_environment
from ingest.job import _settings


def write(tmp_path, text: str):
    path = tmp_path / "ingest.yaml"
    path.write_text(text)
    return path


def test_kafka_keys_and_secrets_from_the_environment(tmp_path):
    conf = write(
        tmp_path,
        "kafka:\n"
        "  security.protocol: SASL_SSL\n"
        "  sasl.mechanism: SCRAM-SHA-256\n"
        "  sasl.username: loader\n"
        "  ssl.ca.location: /etc/kafka/ca.pem\n",
    )
    secrets = secrets_from_environment({"KAFKA_HOURLY_KAFKA_SASL_PASSWORD": "pw"})
    config = load_config(conf, ["kafka.ssl.endpoint.identification.algorithm=none"], secrets)
    expected = SecurityConfig(
        "SASL_SSL",
        ssl_cafile="/etc/kafka/ca.pem",
        ssl_check_hostname=False,
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="loader",
        sasl_plain_password="pw",
    )
    assert kafka_security(config) == expected
    # The tasks carry it to the executors.
    settings = pickle.loads(pickle.dumps(_settings(config, "run-1", ())))
    assert settings.security == expected
    assert kafka_security(load_config(write(tmp_path, "root: x\n"))) == SecurityConfig()


def test_errors_name_the_loads_key(tmp_path):
    with pytest.raises(ConfigError, match="kafka.security.protocol"):
        load_config(write(tmp_path, "kafka: {security.protocol: TLS}\n"))
    with pytest.raises(ConfigError, match="kafka.sasl.username"):
        load_config(
            write(tmp_path, "kafka: {security.protocol: SASL_SSL, sasl.mechanism: PLAIN}\n")
        )
    with pytest.raises(ConfigError, match="Unknown configuration 'kafka.sasl.typo'"):
        load_config(write(tmp_path, "kafka: {sasl.typo: x}\n"))
    with pytest.raises(ConfigError, match="not a secret key"):
        load_config(write(tmp_path, "root: x\n"), secrets={"registry.url": "http://x"})
