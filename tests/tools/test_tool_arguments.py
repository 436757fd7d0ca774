"""Bad arguments of the console and perf tools: argparse's usage and the problem (in
Kafka's words where Kafka has them) on stderr, exit code 2, before any broker is asked."""

from __future__ import annotations

import io
import shlex
import tomllib
from pathlib import Path

import pytest

from broker.tools.__main__ import main

ROOT = Path(__file__).resolve().parents[2]

SCRIPTS = {
    "kafka-console-producer": "broker.tools.console_producer:main",
    "kafka-console-consumer": "broker.tools.console_consumer:main",
    "kafka-producer-perf-test": "broker.tools.producer_perf:main",
    "kafka-consumer-perf-test": "broker.tools.consumer_perf:main",
    "kafka-transactions": "broker.tools.transactions:main",
}

CASES = [
    ("console-consumer --bootstrap-server x:1", "Exactly one of --include/--topic is required."),
    (
        "console-consumer --bootstrap-server x:1 --topic t --offset 5",
        "The partition is required when offset is specified.",
    ),
    (
        "console-consumer --bootstrap-server x:1 --topic t --partition 0 --offset 1 --from-beginning",
        "Options from-beginning and offset cannot be specified together.",
    ),
    (
        "console-consumer --bootstrap-server x:1 --topic t --group g --partition 0",
        "Options group and partition cannot be specified together.",
    ),
    (
        "console-consumer --bootstrap-server x:1 --topic t --partition 0 --offset soon",
        "expected earliest, latest or an offset",
    ),
    ("console-consumer --bootstrap-server x:1 --include '(['", "is not a regular expression"),
    (
        "console-consumer --bootstrap-server x:1 --topic t --property print.keys=true",
        "Unknown property 'print.keys'",
    ),
    (
        "console-consumer --bootstrap-server x:1 --topic t --value-deserializer Nope",
        "Invalid value 'Nope' for value.deserializer",
    ),
    (
        "console-consumer --bootstrap-server x:1 --topic t --consumer-property a=b",
        "--consumer-property needs --group",
    ),
    (
        "console-consumer --bootstrap-server x:1 --topic t --consumer-property security.protocol=TLS",
        "Invalid value 'TLS' for configuration security.protocol",
    ),
    (
        "console-consumer --bootstrap-server x:1 --topic t --consumer.config /nonexistent.properties",
        "Cannot read configuration file /nonexistent.properties",
    ),
    (
        "console-producer --bootstrap-server x:1 --topic t --producer-property "
        "security.protocol=SASL_SSL --producer-property sasl.mechanism=PLAIN",
        "Missing required configuration sasl.username/sasl.password",
    ),
    (
        "consumer-perf-test --bootstrap-server x:1 --topic t --messages 1 "
        "--consumer.config /nonexistent.properties",
        "Cannot read configuration file /nonexistent.properties",
    ),
    (
        "configs --bootstrap-server x:1 --entity-type topics --describe "
        "--command-config /nonexistent.properties",
        "--command-config /nonexistent.properties: Cannot read configuration file",
    ),
    (
        "console-consumer --bootstrap-server x:1 --topic t --group g "
        "--consumer-property session.timeout.ms=soon",
        "Invalid value 'soon' for configuration session.timeout.ms",
    ),
    ("console-producer --bootstrap-server x:1 --topic 'bad topic'", "--topic 'bad topic'"),
    (
        "console-producer --bootstrap-server x:1 --topic t --property parse.key=maybe",
        "Invalid value 'maybe' for property parse.key",
    ),
    (
        "console-producer --bootstrap-server x:1 --topic t --producer-property acks=2",
        "Invalid value '2' for configuration acks",
    ),
    (
        "console-producer --bootstrap-server x:1 --topic t --producer-property lingr.ms=5",
        "Unknown configuration 'lingr.ms'",
    ),
    (
        "console-producer --bootstrap-server x:1 --topic t --compression-codec brotli",
        "Invalid value 'brotli' for configuration compression.type",
    ),
    (
        "console-producer --bootstrap-server x:1 --topic t --property headers.separator=:",
        "headers.separator and headers.key.separator may not be equal",
    ),
    (
        "console-producer --bootstrap-server x:1 --topic t --property novalue",
        "'novalue': expected key=value",
    ),
    (
        "producer-perf-test --topic t --num-records 5 --throughput -1 "
        "--producer-props bootstrap.servers=x:1",
        "Either --record-size or --payload-file must be specified but not both.",
    ),
    (
        "producer-perf-test --topic t --num-records 5 --throughput -1 --record-size 10",
        "Either --producer-props or --producer.config must be specified.",
    ),
    (
        "producer-perf-test --topic t --num-records 5 --throughput -1 --record-size 10 "
        "--producer-props acks=all",
        "Missing required configuration bootstrap.servers",
    ),
    (
        "producer-perf-test --topic t --num-records 5 --throughput -1 --record-size 10 "
        "--producer-props bootstrap.servers=x:1 batch.size=big",
        "Invalid value 'big' for configuration batch.size",
    ),
    (
        "producer-perf-test --topic t --num-records 5 --throughput -1 "
        "--payload-file /nonexistent/payloads --producer-props bootstrap.servers=x:1",
        "/nonexistent/payloads",
    ),
    (
        "producer-perf-test --topic t --num-records many --throughput -1",
        "invalid int value: 'many'",
    ),
    (
        "consumer-perf-test --bootstrap-server x:1 --topic t",
        "the following arguments are required: --messages",
    ),
    (
        "consumer-perf-test --bootstrap-server x:1 --topic t --messages 0",
        "--messages must be at least 1",
    ),
    (
        "transactions --bootstrap-server x:1 find-hanging",
        "The `find-hanging` command requires either --topic or --broker-id",
    ),
    (
        "transactions --bootstrap-server x:1 find-hanging --broker-id 0 --partition 1",
        "The --partition argument requires --topic to be provided",
    ),
    (
        "transactions --bootstrap-server x:1 abort --topic t --partition 0",
        "must be identified either with --start-offset",
    ),
    (
        "transactions --bootstrap-server x:1 abort --topic t --partition 0 --producer-id 5",
        "Missing required argument --producer-epoch",
    ),
    ("transactions --bootstrap-server x:1", "the following arguments are required: COMMAND"),
]


@pytest.mark.parametrize("command, problem", CASES)
def test_bad_arguments_exit_2(command, problem, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(shlex.split(command))
    assert exit_.value.code == 2
    assert problem in capsys.readouterr().err


def test_console_scripts_are_declared():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert {name: scripts[name] for name in SCRIPTS} == SCRIPTS


def test_transactions_tables_are_kafkas():
    """TransactionsCommand's table: each column padded to its widest value, then a tab."""
    from broker.tools.output import Output
    from broker.tools.transactions import LIST_HEADERS, table

    buffer = io.StringIO()
    table(Output(out=buffer), LIST_HEADERS, [("a-long-transactional-id", 0, 4000, "Ongoing")])
    assert buffer.getvalue().splitlines() == [
        "TransactionalId        \tCoordinator\tProducerId\tTransactionState\t",
        "a-long-transactional-id\t0          \t4000      \tOngoing         \t",
    ]
