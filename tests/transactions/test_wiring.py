"""The transaction coordinator wired into a broker, in process: FindCoordinator key type 1
creates and loads __transaction_state, the handlers answer from the coordinator after
the state write, the markers go to the partitions' leaders (a recording transport stands
in for the network), timeouts abort, a restarted broker finishes what it found prepared.
The decisions themselves are tested in test_coordinator.py."""

from __future__ import annotations

import asyncio

import pytest

from broker.protocol.apis import ADD_PARTITIONS_TO_TXN, INIT_PRODUCER_ID
from broker.protocol.errors import ErrorCode as E
from broker.security.acl import Operation as Op
from broker.security.acl import ResourceType as R
from broker.transactions.state import TxnState
from broker.transactions.state_topic import TRANSACTION_STATE_TOPIC, partition_for
from tests.helpers import transactions as tx
from tests.helpers.acls import ADMIN, AUTHORIZER_SETTINGS, allow, as_principal
from tests.helpers.inprocess_broker import InProcessBroker
from tests.helpers.server_requests import create

SETTINGS = {
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "2",
    "transaction.max.timeout.ms": "100000",
}


class Leaders:
    """Stands in for the partition leaders: records each WriteTxnMarkers request and
    answers every partition `code` (or raises, as a lost connection, if `down`)."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, dict]] = []
        self.code = E.NONE
        self.down = False

    async def __call__(self, broker: int, body: dict) -> dict:
        self.requests.append((broker, body))
        if self.down:
            raise ConnectionError("leader unreachable")
        return {
            "markers": [
                {
                    "producer_id": m["producer_id"],
                    "topics": [
                        {
                            "name": t["name"],
                            "partitions": [
                                {"partition_index": p, "error_code": self.code}
                                for p in t["partition_indexes"]
                            ],
                        }
                        for t in m["topics"]
                    ],
                }
                for m in body["markers"]
            ]
        }


def _open(path, leaders: Leaders, **overrides) -> InProcessBroker:
    b = InProcessBroker(path, **SETTINGS, **overrides)
    b.state.transactions.markers.transport = leaders
    b.state.transactions.markers.retry_backoff_ms = 1
    return b


def _close(b: InProcessBroker) -> None:
    b.state.transactions.markers.close()
    tx.run_loop(b, 1)  # the marker task sees its cancellation
    b.close()


@pytest.fixture
def leaders():
    return Leaders()


@pytest.fixture
def broker(tmp_path, leaders):
    b = _open(tmp_path / "logs", leaders)
    create(b, "t", partitions=2)
    tx.ready(b)
    yield b
    _close(b)


def _meta(broker, txn_id: str = "tx"):
    state = broker.state.transactions.state
    return state.partitions[partition_for(txn_id, 3)].transactions[txn_id]


def test_find_coordinator_creates_the_state_topic_with_its_configs(broker):
    assert broker.state.metadata.partition_count(TRANSACTION_STATE_TOPIC) == 3
    config = broker.state.replicas.get(TRANSACTION_STATE_TOPIC, 0).log.config
    # Compacted; one broker alive: the min ISR follows the replication factor down to 1.
    assert (config.cleanup_policy, config.min_insync_replicas) == (("compact",), 1)
    found = tx.ready(broker, "other")
    assert (found["error_code"], found["node_id"]) == (0, 0)
    # Every state partition is loaded: this broker leads them all.
    assert set(broker.state.transactions.state.partitions) == {0, 1, 2}
    empty = tx.find_coordinator(broker, "", key_type=tx.TRANSACTION_KEY)
    assert empty["error_code"] == E.INVALID_REQUEST


def test_commit_writes_markers_then_completes(broker, leaders):
    got = tx.init(broker, "tx")
    assert got["error_code"] == 0 and got["producer_epoch"] == 0
    pid = got["producer_id"]
    assert tx.add_partitions(broker, "tx", pid, 0, {"t": [0, 1]}) == {("t", 0): 0, ("t", 1): 0}
    assert _meta(broker).state == TxnState.ONGOING
    assert tx.end(broker, "tx", pid, 0, commit=True) == 0
    tx.run_loop(broker)
    # One request to the leader (this broker), both partitions, the coordinator's epoch.
    ((node, body),) = leaders.requests
    assert node == 0
    (marker,) = body["markers"]
    assert marker["transaction_result"] is True and marker["producer_id"] == pid
    assert marker["topics"] == [{"name": "t", "partition_indexes": [0, 1]}]
    assert _meta(broker).state == TxnState.COMPLETE_COMMIT
    # The next transaction starts at once; a new InitProducerId bumps the epoch.
    assert tx.add_partitions(broker, "tx", pid, 0, {"t": [0]}) == {("t", 0): 0}
    assert tx.end(broker, "tx", pid, 0, commit=False) == 0
    tx.run_loop(broker)
    assert _meta(broker).state == TxnState.COMPLETE_ABORT
    assert leaders.requests[-1][1]["markers"][0]["transaction_result"] is False
    assert tx.init(broker, "tx")["producer_epoch"] == 1


def test_markers_are_retried_until_the_leader_answers(broker, leaders):
    pid = tx.init(broker, "tx")["producer_id"]
    tx.add_partitions(broker, "tx", pid, 0, {"t": [0]})
    leaders.down = True
    assert tx.end(broker, "tx", pid, 0, commit=True) == 0
    tx.run_loop(broker, 40)
    assert len(leaders.requests) >= 2 and _meta(broker).state == TxnState.PREPARE_COMMIT
    # Meanwhile the producer's next transaction waits (retriable).
    assert tx.add_partitions(broker, "tx", pid, 0, {"t": [1]}) == {
        ("t", 1): E.CONCURRENT_TRANSACTIONS
    }
    leaders.down = False
    tx.run_loop(broker, 40)
    assert _meta(broker).state == TxnState.COMPLETE_COMMIT


def test_a_new_producer_fences_the_old_one_and_aborts_its_transaction(broker, leaders):
    pid = tx.init(broker, "tx")["producer_id"]
    tx.add_partitions(broker, "tx", pid, 0, {"t": [0]})
    # The zombie's successor: its first attempt aborts the open transaction.
    assert tx.init(broker, "tx")["error_code"] == E.CONCURRENT_TRANSACTIONS
    tx.run_loop(broker)
    assert leaders.requests[-1][1]["markers"][0]["transaction_result"] is False
    assert leaders.requests[-1][1]["markers"][0]["producer_epoch"] == 1
    again = tx.init(broker, "tx")
    assert (again["error_code"], again["producer_id"], again["producer_epoch"]) == (0, pid, 2)
    # The old producer is fenced, in the words its version knows.
    assert tx.end(broker, "tx", pid, 0, commit=True) == E.PRODUCER_FENCED
    assert tx.end(broker, "tx", pid, 0, commit=True, version=1) == E.INVALID_PRODUCER_EPOCH
    assert tx.add_partitions(broker, "tx", pid, 0, {"t": [0]}) == {("t", 0): E.PRODUCER_FENCED}


def test_bad_requests_get_kafkas_errors(broker):
    assert tx.init(broker, "tx", timeout_ms=100001)["error_code"] == E.INVALID_TRANSACTION_TIMEOUT
    assert tx.init(broker, "tx", timeout_ms=0)["error_code"] == E.INVALID_TRANSACTION_TIMEOUT
    assert tx.init(broker, "tx", pid=5)["error_code"] == E.INVALID_REQUEST
    assert tx.end(broker, "nobody", 1, 0, commit=True) == E.INVALID_PRODUCER_ID_MAPPING
    pid = tx.init(broker, "tx")["producer_id"]
    assert tx.end(broker, "tx", pid + 1, 0, commit=True) == E.INVALID_PRODUCER_ID_MAPPING
    assert tx.end(broker, "tx", pid, 3, commit=True) == E.PRODUCER_FENCED
    assert tx.end(broker, "tx", pid, 0, commit=True) == E.INVALID_TXN_STATE  # nothing open
    assert tx.add_partitions(broker, "tx", pid, 0, {"t": [0], "nope": [0]}) == {
        ("t", 0): E.OPERATION_NOT_ATTEMPTED,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert _meta(broker).state == TxnState.EMPTY  # nothing was added
    # The group's offsets partition joins the transaction.
    assert tx.add_offsets(broker, "tx", pid, 0, "g") == 0
    assert _meta(broker).partitions == {("__consumer_offsets", partition_for("g", 2))}


def test_idempotent_producers_still_get_ids(broker):
    for version in (0, 2, 4):
        got = tx.answer(broker, INIT_PRODUCER_ID, version, tx.init_body(None))
        assert got["error_code"] == 0 and got["producer_epoch"] == 0


def test_timed_out_transactions_are_aborted_by_the_duty(broker, leaders):
    pid = tx.init(broker, "tx", timeout_ms=5000)["producer_id"]
    tx.add_partitions(broker, "tx", pid, 0, {"t": [0]})
    broker.clock.now += 4000
    assert broker.state.transactions.abort_timed_out() == 0
    broker.clock.now += 2000
    assert broker.state.transactions.abort_timed_out() == 1
    tx.run_loop(broker)
    assert _meta(broker).state == TxnState.COMPLETE_ABORT
    assert tx.end(broker, "tx", pid, 0, commit=True) == E.PRODUCER_FENCED


def test_verify_only_checks_without_adding(broker):
    pid = tx.init(broker, "tx")["producer_id"]
    tx.add_partitions(broker, "tx", pid, 0, {"t": [0]})
    body = {
        "transactions": [
            {
                "transactional_id": "tx",
                "producer_id": pid,
                "producer_epoch": 0,
                "verify_only": True,
                "topics": [{"name": "t", "partitions": [0, 1]}],
            }
        ]
    }
    got = tx.answer(broker, ADD_PARTITIONS_TO_TXN, 4, body)
    (txn,) = got["results_by_transaction"]
    codes = {p["partition_index"]: p["partition_error_code"] for p in txn["topic_results"][0]["results_by_partition"]}  # fmt: skip
    assert codes == {0: 0, 1: E.INVALID_TXN_STATE}
    assert _meta(broker).partitions == {("t", 0)}


def test_a_restarted_coordinator_completes_a_prepared_commit(tmp_path, leaders):
    b = _open(tmp_path / "logs", leaders)
    create(b, "t")
    tx.ready(b)
    pid = tx.init(b, "tx")["producer_id"]
    tx.add_partitions(b, "tx", pid, 0, {"t": [0]})
    leaders.down = True
    assert tx.end(b, "tx", pid, 0, commit=True) == 0
    tx.run_loop(b)
    assert _meta(b).state == TxnState.PREPARE_COMMIT
    _close(b)
    # The next leader of the state partition reads it, and sends the markers again.
    again = Leaders()
    b = _open(tmp_path / "logs", again)
    try:
        tx.run_loop(b, 40)
        assert again.requests and again.requests[0][1]["markers"][0]["transaction_result"]
        assert _meta(b).state == TxnState.COMPLETE_COMMIT
        assert tx.init(b, "tx")["producer_epoch"] == 1
    finally:
        _close(b)


def test_loading_partitions_answer_load_in_progress(broker):
    manager = broker.state.transactions
    index = partition_for("tx", 3)
    manager.state.loading.add(index)
    assert tx.init(broker, "tx")["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
    manager.state.loading.discard(index)
    del manager.state.partitions[index]
    assert tx.end(broker, "tx", 1, 0, commit=True) == E.NOT_COORDINATOR


def test_transactional_ids_need_their_acls(tmp_path, leaders):
    b = _open(tmp_path / "logs", leaders, **AUTHORIZER_SETTINGS)
    try:
        with as_principal(b, ADMIN):
            create(b, "t")
            tx.ready(b)
            pid = tx.init(b, "tx")["producer_id"]
        alice = "User:alice"
        with as_principal(b, alice):
            found = tx.find_coordinator(b, "tx", key_type=tx.TRANSACTION_KEY)
            assert found["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            assert tx.init(b, "tx")["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            assert tx.add_partitions(b, "tx", pid, 0, {"t": [0]}) == {
                ("t", 0): E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            }
            assert tx.end(b, "tx", pid, 0, True) == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            assert tx.add_offsets(b, "tx", pid, 0, "g") == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        allow(b, alice, Op.WRITE, R.TRANSACTIONAL_ID, "tx")
        with as_principal(b, alice):
            assert tx.find_coordinator(b, "tx", key_type=tx.TRANSACTION_KEY)["error_code"] == 0
            pid = tx.init(b, "tx")["producer_id"]
            assert tx.add_partitions(b, "tx", pid, 1, {"t": [0]}) == {
                ("t", 0): E.TOPIC_AUTHORIZATION_FAILED
            }
            assert tx.add_offsets(b, "tx", pid, 1, "g") == E.GROUP_AUTHORIZATION_FAILED
    finally:
        _close(b)


def test_markers_stop_once_the_state_partition_moves_away(broker, leaders):
    manager = broker.state.transactions
    pid = tx.init(broker, "tx")["producer_id"]
    tx.add_partitions(broker, "tx", pid, 0, {"t": [0]})
    leaders.down = True
    assert tx.end(broker, "tx", pid, 0, commit=True) == 0
    tx.run_loop(broker)
    # Leadership moved: the next coordinator loads the PrepareCommit and sends them.
    broker.state.replicas.stop_replicas([(TRANSACTION_STATE_TOPIC, partition_for("tx", 3))], False)
    manager.leadership_changed(TRANSACTION_STATE_TOPIC, partition_for("tx", 3))
    tx.run_loop(broker)
    sent = len(leaders.requests)
    tx.run_loop(broker)
    assert len(leaders.requests) == sent and not manager.markers.waiting
    assert tx.init(broker, "tx")["error_code"] == E.NOT_COORDINATOR


def test_one_request_in_flight_per_broker(broker, leaders):
    gate = asyncio.Event()
    answer = leaders.__call__

    async def slow(node: int, body: dict) -> dict:
        if len(leaders.requests) == 0:
            leaders.requests.append((node, body))
            await gate.wait()
            leaders.requests.pop(0)
        return await answer(node, body)

    broker.state.transactions.markers.transport = slow
    pids = {}
    for txn_id in ("a", "b"):
        tx.ready(broker, txn_id)
        pids[txn_id] = tx.init(broker, txn_id)["producer_id"]
        tx.add_partitions(broker, txn_id, pids[txn_id], 0, {"t": [0]})
    assert tx.end(broker, "a", pids["a"], 0, commit=True) == 0
    tx.run_loop(broker)
    assert tx.end(broker, "b", pids["b"], 0, commit=True) == 0
    tx.run_loop(broker)
    # b's marker waits for the answer to a's request to the same broker.
    assert [b["markers"][0]["producer_id"] for _, b in leaders.requests] == [pids["a"]]
    gate.set()
    tx.run_loop(broker)
    sent = [[m["producer_id"] for m in b["markers"]] for _, b in leaders.requests]
    assert sent == [[pids["a"]], [pids["b"]]]
    assert _meta(broker, "a").state == _meta(broker, "b").state == TxnState.COMPLETE_COMMIT


def test_idle_transactional_ids_expire(broker):
    pid = tx.init(broker, "tx")["producer_id"]
    manager = broker.state.transactions
    broker.clock.now += 604_800_000  # transactional.id.expiration.ms
    assert manager.expire_transactional_ids() == 1
    tx.run_loop(broker)
    assert "tx" not in manager.state.partitions[partition_for("tx", 3)].transactions
    assert tx.end(broker, "tx", pid, 0, commit=True) == E.INVALID_PRODUCER_ID_MAPPING
    again = tx.init(broker, "tx")
    assert again["producer_id"] != pid and again["producer_epoch"] == 0


def test_init_waits_for_a_block_of_producer_ids(broker):
    """A cluster broker between blocks of ids (ZooKeeper) decides once it has one."""

    class BetweenBlocks:
        def allocate(self):
            return None

        async def next_id(self):
            return 4242

    broker.state.producer_ids = BetweenBlocks()
    got = tx.init(broker, "tx")
    assert (got["error_code"], got["producer_id"], got["producer_epoch"]) == (0, 4242, 0)
    assert _meta(broker).producer_id == 4242
