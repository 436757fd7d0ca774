"""KIP-890 part 1 against a broker process, raw requests: a transactional Produce to a
partition never added with AddPartitionsToTxn is refused and not appended; once added,
the same batch is appended (the leader asked its coordinator over the inter-broker
listener). confluent-kafka's transactional producer over the same path:
test_transactional_clients.py."""

from __future__ import annotations

import uuid

from broker.processes import BrokerProcess
from broker.protocol.apis import ADD_PARTITIONS_TO_TXN, FIND_COORDINATOR, INIT_PRODUCER_ID, PRODUCE
from broker.protocol.errors import ErrorCode as E
from tests.helpers import transactions as tx
from tests.helpers.cluster import wait_for
from tests.helpers.server_requests import Wire, create, list_offsets, txn_records


def test_a_produce_to_a_partition_not_added_is_refused(tmp_path):
    settings = {"transaction.state.log.num.partitions": "2", "offsets.topic.num.partitions": "1"}
    with BrokerProcess(tmp_path / "logs", settings) as broker:
        wire = Wire(broker.bootstrap)
        try:
            txn_id = f"v-{uuid.uuid4().hex[:8]}"
            find = {"key": txn_id, "key_type": tx.TRANSACTION_KEY, "coordinator_keys": [txn_id]}
            wait_for(lambda: wire.call(FIND_COORDINATOR, 3, find)["error_code"] == 0, "coordinator")
            init = wire.call(INIT_PRODUCER_ID, 4, tx.init_body(txn_id))
            assert init["error_code"] == 0
            pid, epoch = init["producer_id"], init["producer_epoch"]
            assert create(wire, "t")["error_code"] == 0

            def produce() -> dict:
                body = {
                    "transactional_id": txn_id, "acks": -1, "timeout_ms": 5000,
                    "topic_data": [{"name": "t", "partition_data": [
                        {"index": 0, "records": txn_records(pid, b"x", epoch=epoch)},
                    ]}],
                }  # fmt: skip
                (p,) = wire.call(PRODUCE, 8, body)["responses"][0]["partition_responses"]
                return p

            refused = produce()
            assert refused["error_code"] == E.INVALID_TXN_STATE, refused
            assert refused["error_message"]
            assert list_offsets(wire, "t", -1)["offset"] == 0
            added = wire.call(
                ADD_PARTITIONS_TO_TXN, 3, tx.add_partitions_body(txn_id, pid, epoch, {"t": [0]})
            )
            assert (
                added["results_by_topic_v3_and_below"][0]["results_by_partition"][0][
                    "partition_error_code"
                ]
                == 0
            )
            appended = produce()
            assert (appended["error_code"], appended["base_offset"]) == (0, 0)
            assert list_offsets(wire, "t", -1)["offset"] == 1
        finally:
            wire.close()
