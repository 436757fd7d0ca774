"""Kafka security for the load from the `kafka_default` Connection: the non-secret extras
become `kafka.*` overrides (what goes to XCom, the logs and spark-submit's command line),
the password never does; each task gets it from the connection in process, and
spark-submit's driver in its environment when the task runs (not when the DAG is parsed).
The logs of resolving and loading the settings are grepped for the password."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from broker.client.security import SecurityConfig
from broker.processes import ROOT
from ingest.config import kafka_security

PASSWORD = "the-loader-secret-9f3b"
KEY_PASSWORD = "the-key-secret-41c7"
REGISTRY_PASSWORD = "the-registry-secret-77d2"


@pytest.fixture
def kafka_connection(monkeypatch, tmp_path):
    conf = tmp_path / "ingest.yaml"
    conf.write_text(f"root: {tmp_path / 'warehouse'}\n")
    monkeypatch.setenv("KAFKA_HOURLY_CONFIG", str(conf))
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_DEFAULT",
        json.dumps(
            {
                "conn_type": "kafka",
                "login": "loader",
                "password": PASSWORD,
                "extra": {
                    "bootstrap.servers": "broker-1:9093",
                    "security.protocol": "SASL_SSL",
                    "sasl.mechanism": "SCRAM-SHA-512",
                    "ssl.ca.location": "/etc/kafka/ca.pem",
                    "ssl.key.password": KEY_PASSWORD,
                },
            }
        ),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_SCHEMA_REGISTRY_DEFAULT",
        json.dumps(
            {
                "conn_type": "http",
                "host": "registry-1",
                "port": 8443,
                "schema": "https",
                "login": "loader",
                "password": REGISTRY_PASSWORD,
                "extra": {"ssl.ca.location": "/etc/registry/ca.pem"},
            }
        ),
    )
    monkeypatch.syspath_prepend(str(ROOT / "dags"))
    for name in [m for m in sys.modules if m.startswith("ingest_airflow")]:
        monkeypatch.delitem(sys.modules, name)


def test_secrets_stay_out_of_overrides_xcom_and_logs(kafka_connection, airflow_db, caplog):
    from ingest_airflow import settings

    caplog.set_level(logging.DEBUG)
    resolved = settings.resolve()
    logging.getLogger("test").info(
        "config %s, overrides %s", resolved.config_path, resolved.overrides
    )
    assert "kafka.security.protocol=SASL_SSL" in resolved.overrides
    assert "kafka.sasl.username=loader" in resolved.overrides
    assert "kafka.sasl.mechanism=SCRAM-SHA-512" in resolved.overrides
    assert "registry.url=https://registry-1:8443" in resolved.overrides
    assert "registry.ssl.ca.location=/etc/registry/ca.pem" in resolved.overrides
    # What the plan task returns to XCom and what spark-submit gets on its command line.
    shared = json.dumps({"settings": resolved.__dict__, "args": resolved.cli_args()})
    for secret in (PASSWORD, KEY_PASSWORD, REGISTRY_PASSWORD):
        assert secret not in shared

    config = resolved.load()  # as every task loads it: secrets from the connection
    security = kafka_security(config)
    assert security == SecurityConfig(
        "SASL_SSL",
        ssl_cafile="/etc/kafka/ca.pem",
        ssl_password=KEY_PASSWORD,
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="loader",
        sasl_plain_password=PASSWORD,
    )
    assert config["registry.basic.auth.user.info"] == f"loader:{REGISTRY_PASSWORD}"
    logging.getLogger("test").info("settings %s", config)
    assert settings.secret_environment() == {
        "KAFKA_HOURLY_KAFKA_SASL_PASSWORD": PASSWORD,
        "KAFKA_HOURLY_KAFKA_SSL_KEY_PASSWORD": KEY_PASSWORD,
        "KAFKA_HOURLY_REGISTRY_USER_INFO": f"loader:{REGISTRY_PASSWORD}",
    }
    assert caplog.text and "SASL_SSL" in caplog.text
    for secret in (PASSWORD, KEY_PASSWORD, REGISTRY_PASSWORD):
        assert secret not in caplog.text


def test_spark_submit_gets_the_secrets_only_when_it_runs(dagbag):
    load = dagbag.get_dag("kafka_hourly_load").get_task("load")
    assert type(load).__name__ == "IngestSubmitOperator"
    assert not any(k.startswith("KAFKA_HOURLY_") for k in load.env_vars)
