"""kafka-transactions against a broker process (one for the module): a hanging
transaction made with raw requests (a transactional batch whose transactional id no
coordinator knows) found with `find-hanging` and aborted with `abort`, after which a
read_committed consumer (confluent-kafka) reads past it; `list`, `describe` and
`describe-producers` on a confluent-kafka transactional producer's open transaction,
checked against kafka-python's admin client, which speaks the same APIs."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from broker.processes import BrokerProcess
from broker.protocol.apis import INIT_PRODUCER_ID, PRODUCE
from broker.tools import transactions as tool
from tests.helpers import transactions as tx
from tests.helpers.server_requests import produce_body, txn_records, values
from tests.transactions.test_transactional_clients import SETTINGS, _read


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    # Without KIP-890's check at the leader, as a broker before it: the only way a
    # transactional id the coordinator never heard of can open a transaction (a hanging one).
    settings = {**SETTINGS, "transaction.partition.verification.enable": "false"}
    with BrokerProcess(tmp_path_factory.mktemp("tools-broker") / "logs", settings) as b:
        yield b


def _topic(address: str) -> str:
    return tx.raw_created_topic(address, f"tools-{uuid.uuid4().hex[:8]}", partitions=2)


def _tool(capsys, address: str, *argv: str) -> tuple[int, list[list[str]], str]:
    """The exit code, the table printed (rows of tab-separated cells, Kafka's) and stderr."""
    code = tool.main(["--bootstrap-server", address, *argv])
    printed = capsys.readouterr()
    rows = [[c.strip() for c in line.split("\t")[:-1]] for line in printed.out.splitlines()]
    return code, rows, printed.err


def _produce(address: str, topic: str, records: bytes, txn_id: str | None = None) -> dict:
    body = produce_body(topic, records)
    body["transactional_id"] = txn_id
    (p,) = tx.raw_request(address, PRODUCE, body)["responses"][0]["partition_responses"]
    return p


def test_a_hanging_transaction_is_found_and_aborted(txn_broker, capsys):
    address = txn_broker.bootstrap
    topic = _topic(address)
    # A producer id the coordinator gives out without a transactional id: no coordinator
    # will ever end a transaction it opens.
    pid = tx.raw_request(address, INIT_PRODUCER_ID, tx.init_body(None))["producer_id"]
    assert _produce(address, topic, txn_records(pid, b"h0", b"h1"), "ghost")["error_code"] == 0
    assert _produce(address, topic, values(b"after"))["error_code"] == 0
    # The open transaction holds the last stable offset: read_committed sees nothing.
    assert _read(address, topic, 1, 0, "read_committed") == []

    code, rows, _ = _tool(capsys, address, "find-hanging", "--topic", topic)
    assert code == 0
    assert rows[0] == list(tool.HANGING_HEADERS)
    # Its batch's timestamps (1000 ms after the epoch) are older than any timeout.
    assert rows[1:] == [[topic, "0", str(pid), "0", "-1", "0", "1001", rows[1][7]]]
    code, rows, _ = _tool(capsys, address, "find-hanging", "--broker-id", "0")
    assert [topic, "0", str(pid)] in [r[:3] for r in rows]

    code, rows, _ = _tool(
        capsys, address, "describe-producers", "--topic", topic, "--partition", "0"
    )
    assert rows == [list(tool.PRODUCERS_HEADERS), [str(pid), "0", "-1", "1", "1001", "0"]]

    code, _, err = _tool(capsys, address, "abort", "--topic", topic, "--partition", "0",
                         "--start-offset", "5")  # fmt: skip
    assert code == 1
    assert "Could not find any open transactions starting at offset 5" in err
    code, _, _ = _tool(capsys, address, "abort", "--topic", topic, "--partition", "0",
                    "--start-offset", "0")  # fmt: skip
    assert code == 0
    got = _read(address, topic, 1, 1, "read_committed")
    assert [m.value() for m in got] == [b"after"]
    code, rows, _ = _tool(capsys, address, "find-hanging", "--topic", topic, "--partition", "0")
    assert rows == [list(tool.HANGING_HEADERS)]


def test_list_describe_and_producers_of_an_open_transaction(txn_broker, capsys):
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition

    address = txn_broker.bootstrap
    topic = _topic(address)
    txn_id = f"open-{topic}"
    producer = Producer({"bootstrap.servers": address, "transactional.id": txn_id,
                         "transaction.timeout.ms": 60000})  # fmt: skip
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"pending", partition=1)
    producer.flush(30)
    try:
        code, rows, _ = _tool(capsys, address, "list")
        assert code == 0 and rows[0] == list(tool.LIST_HEADERS)
        (mine,) = [r for r in rows if r[0] == txn_id]
        pid = int(mine[2])
        assert (mine[1], mine[3]) == ("0", "Ongoing")

        code, rows, _ = _tool(capsys, address, "describe", "--transactional-id", txn_id)
        assert rows[0] == list(tool.DESCRIBE_HEADERS)
        assert rows[1][:6] == ["0", txn_id, str(pid), "0", "Ongoing", "60000"]
        assert rows[1][8] == f"{topic}-1"
        code, _, err = _tool(capsys, address, "describe", "--transactional-id", "nobody")
        assert code == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in err, err

        code, rows, _ = _tool(capsys, address, "describe-producers", "--topic", topic,
                           "--partition", "1")  # fmt: skip
        assert [r[0] for r in rows[1:]] == [str(pid)] and rows[1][5] == "0"
        # Open, but its coordinator has it open on that partition: not hanging.
        code, rows, _ = _tool(capsys, address, "find-hanging", "--topic", topic,
                           "--max-transaction-timeout", "0")  # fmt: skip
        assert rows == [list(tool.HANGING_HEADERS)]

        admin = KafkaAdminClient(bootstrap_servers=address)
        try:
            listed = [t for ts in admin.list_transactions().values() for t in ts]
            assert txn_id in {t.transactional_id for t in listed}
            described = admin.describe_transactions([txn_id])[txn_id]
            assert described.producer_id == pid
            assert described.topic_partitions == {TopicPartition(topic, 1)}
            states = admin.describe_producers([TopicPartition(topic, 1)])
            (state,) = states[TopicPartition(topic, 1)].active_producers
            assert (state.producer_id, state.current_transaction_start_offset) == (pid, 0)
        finally:
            admin.close()
    finally:
        producer.abort_transaction(30)
