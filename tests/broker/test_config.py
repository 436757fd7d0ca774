"""The config registry: bad values are refused naming the key; docs come from it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from broker.config.definition import ConfigError, parse_properties
from broker.config.server import SAMPLE_HEADER, SAMPLE_SETTINGS, SERVER_CONFIG, BrokerConfig
from broker.processes import ROOT


@pytest.mark.parametrize(
    "key,value",
    [
        ("log.segment.bytes", "ten"),
        ("log.segment.bytes", "10"),
        ("listeners", "http:/nowhere"),
        ("auto.create.topics.enable", "maybe"),
        ("num.partitions", "0"),
        ("log.retention.bytes", "-7"),
    ],
)
def test_bad_values_name_key_and_value(key, value):
    with pytest.raises(ConfigError) as err:
        BrokerConfig.from_mapping({key: value})
    assert key in str(err.value) and value in str(err.value)


def test_unknown_key_is_refused():
    with pytest.raises(ConfigError, match="log.retention.hourz"):
        BrokerConfig.from_mapping({"log.retention.hourz": "1"})


def test_retention_precedence_like_kafka():
    assert BrokerConfig.from_mapping({"log.retention.hours": "2"}).retention_ms == 7_200_000
    assert (
        BrokerConfig.from_mapping(
            {"log.retention.hours": "2", "log.retention.minutes": "3"}
        ).retention_ms
        == 180_000
    )
    assert (
        BrokerConfig.from_mapping(
            {"log.retention.minutes": "3", "log.retention.ms": "5"}
        ).retention_ms
        == 5
    )


def test_properties_parsing():
    text = "# comment\n! also\na=1\nb : two\nc=multi \\\n  line\n\n"
    assert parse_properties(text) == {"a": "1", "b": "two", "c": "multi line"}


def test_conf_file_is_generated_from_the_registry():
    committed = (ROOT / "conf" / "server.properties").read_text()
    assert committed == SERVER_CONFIG.to_properties(SAMPLE_SETTINGS, SAMPLE_HEADER), (
        "regenerate: python -m broker config-docs --properties > conf/server.properties"
    )
    for key in SERVER_CONFIG.keys:
        assert key in committed
    BrokerConfig.from_mapping(parse_properties(committed))


def test_start_refuses_bad_config_with_the_key(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "broker",
            "start",
            str(ROOT / "conf" / "server.properties"),
            "--override",
            "log.flush.interval.ms=soon",
            "--override",
            f"log.dirs={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "log.flush.interval.ms" in out.stderr and "soon" in out.stderr


def test_configuration_reference_is_generated_from_the_declarations():
    from broker.client.zk_consumer.config import ZK_CONSUMER_CONFIG
    from broker.server.topic_config import TOPIC_CONFIG
    from ingest.config import INGEST_CONFIG

    text = (ROOT / "docs" / "configuration.md").read_text()
    for definition in (SERVER_CONFIG, TOPIC_CONFIG, ZK_CONSUMER_CONFIG, INGEST_CONFIG):
        assert definition.to_markdown() in text, "regenerate: docs/gen_configuration.sh"


@pytest.mark.parametrize(
    "text, expected",
    [
        # The key ends at the first unescaped '=', ':' or white space (java.util.Properties).
        ("key value\nk2\tv2\nk3   =   v3\n", {"key": "value", "k2": "v2", "k3": "v3"}),
        ("k4:v4=x\nk5 :  : v\n", {"k4": "v4=x", "k5": ": v"}),
        (
            "a\\=b=c\nsp\\ ace = v\ncolon\\:key:val\n",
            {"a=b": "c", "sp ace": "v", "colon:key": "val"},
        ),
        ("onlykey\n", {"onlykey": ""}),
        # An even number of trailing backslashes is an escaped backslash, not a continuation.
        ("even=ends\\\\\nnext=1\n", {"even": "ends\\", "next": "1"}),
        ("u=\\u0041\\tB\n", {"u": "A\tB"}),
        ("  # indented comment\n#x=y\\\nz=1\n", {"z": "1"}),
    ],
)
def test_properties_follow_java_rules(text, expected):
    assert parse_properties(text) == expected


def test_malformed_unicode_escape_is_refused():
    with pytest.raises(ConfigError, match="uXXXX"):
        parse_properties("x=\\u00zz\n")
