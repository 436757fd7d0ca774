"""Transactional offset commits in process (docs/contracts/consumer-groups.md,
"Transactional offsets"): TxnOffsetCommit writes a transactional batch, the offsets stay
pending until the transaction's marker, COMMIT applies them, ABORT drops them, and a
load of __consumer_offsets rebuilds the same from the batches and control records.

The markers come through WriteTxnMarkers, as the transaction coordinator sends them."""

from __future__ import annotations

from broker.coordinator.offsets_topic import OFFSETS_TOPIC, partition_for
from broker.protocol.errors import ErrorCode as E
from broker.records.batch import iter_batches
from broker.security.acl import Operation as Op
from broker.security.acl import ResourceType as R
from tests.helpers.acls import ADMIN, AUTHORIZER_SETTINGS, allow, as_principal
from tests.helpers.groups import (
    DELAY,
    SETTINGS,
    commit,
    commit_errors,
    committed,
    fetch_offsets,
    join,
    partition_errors,
    ready,
    run_loop,
    stable_group,
    txn_commit,
)
from tests.helpers.inprocess_broker import InProcessBroker
from tests.helpers.server_requests import create, write_marker

PID = 4000
P = partition_for("g", 4)  # the group's offsets partition (SETTINGS: 4 of them)


def append_marker(broker, producer_id: int, commit_: bool, epoch: int = 0, index: int = P):
    """The transaction's COMMIT/ABORT marker on the offsets partition, through
    WriteTxnMarkers (whose handler tells the group coordinator once it is replicated)."""
    answer = write_marker(
        broker, producer_id, OFFSETS_TOPIC, commit_, partitions=(index,), epoch=epoch
    )
    assert answer == [0]


def stable_fetch(broker, group="g", partitions=None) -> dict[tuple[str, int], tuple[int, int]]:
    """OffsetFetch v7 with require_stable: (topic, partition) -> (offset, error)."""
    answer = fetch_offsets(broker, group, partitions, require_stable=True)
    return {
        (t["name"], p["partition_index"]): (p["committed_offset"], p["error_code"])
        for t in answer["topics"]
        for p in t["partitions"]
    }


def test_offsets_are_pending_until_the_commit_marker(broker):
    commit(broker, "g", {("t", 0): 5}).result()
    answer = txn_commit(broker, "g", {("t", 0): 10, ("t", 1): 20}, PID)
    assert commit_errors(answer) == {("t", 0): 0, ("t", 1): 0}
    # Not visible: the last committed offset, or nothing.
    assert committed(broker, "g", [("t", 0), ("t", 1)]) == {("t", 0): 5, ("t", 1): -1}
    assert stable_fetch(broker, "g", [("t", 0), ("t", 1), ("t", 2)]) == {
        ("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT),
        ("t", 1): (-1, E.UNSTABLE_OFFSET_COMMIT),
        ("t", 2): (-1, 0),
    }
    append_marker(broker, PID, commit_=True)
    assert committed(broker, "g", [("t", 0), ("t", 1)]) == {("t", 0): 10, ("t", 1): 20}
    assert stable_fetch(broker, "g", [("t", 0)]) == {("t", 0): (10, 0)}


def test_an_abort_marker_drops_them(broker):
    commit(broker, "g", {("t", 0): 5}).result()
    txn_commit(broker, "g", {("t", 0): 10}, PID).result()
    append_marker(broker, PID, commit_=False)
    assert committed(broker, "g") == {("t", 0): 5}
    assert stable_fetch(broker, "g", [("t", 0)]) == {("t", 0): (5, 0)}


def test_the_batch_is_transactional_under_the_producer(broker):
    txn_commit(broker, "g", {("t", 0): 10}, PID, producer_epoch=3).result()
    txn_commit(broker, "g", {("t", 1): 11}, PID, producer_epoch=3).result()  # not a duplicate
    log = broker.state.replicas.get(OFFSETS_TOPIC, P).log
    data = b"".join(bytes(r.read()) for r in log.read(0, 1 << 20).regions)
    headers = [h for _, h in iter_batches(data) if h.producer_id == PID]
    assert len(headers) == 2
    assert all(h.is_transactional and not h.is_control and h.producer_epoch == 3 for h in headers)
    assert [h.base_sequence for h in headers] == [0, 1]


def test_a_fenced_epoch_is_refused_by_the_log(broker):
    txn_commit(broker, "g", {("t", 0): 10}, PID, producer_epoch=2).result()
    old = txn_commit(broker, "g", {("t", 0): 99}, PID, producer_epoch=1)
    assert commit_errors(old) == {("t", 0): E.INVALID_PRODUCER_EPOCH}
    append_marker(broker, PID, commit_=True, epoch=2)
    assert committed(broker, "g") == {("t", 0): 10}


def test_a_later_plain_commit_wins_over_an_earlier_transaction(broker):
    txn_commit(broker, "g", {("t", 0): 10, ("t", 1): 11}, PID).result()
    commit(broker, "g", {("t", 0): 50}).result()
    append_marker(broker, PID, commit_=True)
    assert committed(broker, "g") == {("t", 0): 50, ("t", 1): 11}


def test_producers_complete_independently(broker):
    txn_commit(broker, "g", {("t", 0): 10}, PID).result()
    txn_commit(broker, "g", {("t", 1): 20}, PID + 1).result()
    append_marker(broker, PID + 1, commit_=True)
    assert committed(broker, "g") == {("t", 1): 20}
    assert stable_fetch(broker, "g", [("t", 0)]) == {("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT)}
    # A marker on another offsets partition is not this group's.
    broker.state.groups.complete_transaction((P + 1) % 4, PID, True)
    assert committed(broker, "g") == {("t", 1): 20}


def test_members_are_checked_when_the_request_names_one(broker):
    generation, (a, _), _ = stable_group(broker)
    offsets = {("t", 0): 1}

    def error(**kw) -> int:
        (code,) = set(
            partition_errors(txn_commit(broker, "g", offsets, PID, **kw).result()).values()
        )
        return code

    assert error(generation=generation, member_id=a) == 0
    assert error(generation=generation + 1, member_id=a) == E.ILLEGAL_GENERATION
    assert error(generation=generation, member_id="stranger") == E.UNKNOWN_MEMBER_ID
    assert error(generation=generation, member_id=a, instance="nobody") == E.UNKNOWN_MEMBER_ID
    # v0-v2 name no member: a producer commits for a group with members.
    assert error(version=2) == 0
    assert error(version=0) == 0


def test_an_instance_id_held_by_another_member_is_fenced(broker):
    joined = join(broker, "s", instance="i-1")
    broker.advance(DELAY)
    generation, member = joined.result()["generation_id"], joined.result()["member_id"]
    answer = txn_commit(
        broker, "s", {("t", 0): 1}, PID, generation=generation, member_id="old", instance="i-1"
    )
    assert commit_errors(answer) == {("t", 0): E.FENCED_INSTANCE_ID}
    answer = txn_commit(
        broker, "s", {("t", 0): 1}, PID, generation=generation, member_id=member, instance="i-1"
    )
    assert commit_errors(answer) == {("t", 0): 0}


def test_bad_requests(broker):
    assert set(commit_errors(txn_commit(broker, "", {("t", 0): 1}, PID)).values()) == {
        E.INVALID_GROUP_ID
    }
    answer = txn_commit(broker, "g", {("t", 0): 1, ("nope", 0): 1}, PID, metadata="")
    assert commit_errors(answer) == {("t", 0): 0, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    big = txn_commit(broker, "g", {("t", 1): 1}, PID, metadata="m" * 5000)
    assert commit_errors(big) == {("t", 1): E.OFFSET_METADATA_TOO_LARGE}
    append_marker(broker, PID, commit_=True)
    assert committed(broker, "g") == {("t", 0): 1}


# -- loading __consumer_offsets -----------------------------------------------------------


def restarted(broker: InProcessBroker, tmp_path) -> InProcessBroker:
    broker.close()
    again = InProcessBroker(tmp_path / "logs", **SETTINGS)
    run_loop(again)
    return again


def test_a_load_applies_committed_and_drops_aborted_transactions(tmp_path):
    b = InProcessBroker(tmp_path / "logs", **SETTINGS)
    create(b, "t", partitions=4)
    ready(b)
    commit(b, "g", {("t", 0): 5, ("t", 2): 7}).result()
    txn_commit(b, "g", {("t", 0): 10, ("t", 1): 20}, PID).result()
    append_marker(b, PID, commit_=True)
    txn_commit(b, "g", {("t", 2): 70}, PID + 1).result()
    append_marker(b, PID + 1, commit_=False)
    txn_commit(b, "g", {("t", 0): 90}, PID + 2).result()
    commit(b, "g", {("t", 0): 95}).result()  # after that batch: wins at its commit
    append_marker(b, PID + 2, commit_=True)
    expected = {("t", 0): 95, ("t", 1): 20, ("t", 2): 7}
    assert committed(b, "g") == expected

    again = restarted(b, tmp_path)
    assert committed(again, "g") == expected
    assert stable_fetch(again, "g", [("t", 0), ("t", 1), ("t", 2)]) == {
        tp: (offset, 0) for tp, offset in expected.items()
    }
    again.close()


def test_a_transaction_without_its_marker_stays_pending_after_a_load(tmp_path):
    b = InProcessBroker(tmp_path / "logs", **SETTINGS)
    create(b, "t", partitions=4)
    ready(b)
    txn_commit(b, "solo", {("t", 0): 10}, PID).result()  # a group with only pending offsets
    again = restarted(b, tmp_path)
    assert committed(again, "solo", [("t", 0)]) == {("t", 0): -1}
    assert stable_fetch(again, "solo", [("t", 0)]) == {("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT)}
    assert again.state.groups.expire_offsets() == 0
    append_marker(again, PID, commit_=True, index=partition_for("solo", 4))
    assert committed(again, "solo") == {("t", 0): 10}
    again.close()


def test_a_marker_during_the_load_applies_once_loaded(tmp_path):
    b = InProcessBroker(tmp_path / "logs", **SETTINGS)
    create(b, "t", partitions=4)
    ready(b)
    txn_commit(b, "g", {("t", 0): 10}, PID).result()
    b.close()
    again = InProcessBroker(tmp_path / "logs", **SETTINGS)
    assert P in again.state.groups.manager.loading  # the load has not run yet
    append_marker(again, PID, commit_=True)
    run_loop(again)
    assert committed(again, "g") == {("t", 0): 10}
    again.close()


# -- authorization --------------------------------------------------------------------------


def test_transactional_id_group_and_topics_are_authorized(tmp_path):
    b = InProcessBroker(tmp_path / "logs", **AUTHORIZER_SETTINGS, **SETTINGS)
    alice = "User:alice"
    with as_principal(b, ADMIN):
        create(b, "t")
        create(b, "u")
        ready(b)
    offsets = {("t", 0): 1, ("u", 0): 2}

    def codes():
        with as_principal(b, alice):
            return commit_errors(txn_commit(b, "g", offsets, PID, transactional_id="tx"))

    assert set(codes().values()) == {E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    allow(b, alice, Op.WRITE, R.TRANSACTIONAL_ID, "tx")
    assert set(codes().values()) == {E.GROUP_AUTHORIZATION_FAILED}
    allow(b, alice, Op.READ, R.GROUP, "g")
    assert codes() == {
        ("t", 0): E.TOPIC_AUTHORIZATION_FAILED,
        ("u", 0): E.TOPIC_AUTHORIZATION_FAILED,
    }
    allow(b, alice, Op.READ, R.TOPIC, "t")
    assert codes() == {("t", 0): 0, ("u", 0): E.TOPIC_AUTHORIZATION_FAILED}
    b.close()


def test_losing_the_partition_forgets_its_pending_offsets(broker):
    txn_commit(broker, "g", {("t", 0): 10}, PID).result()
    manager = broker.state.groups.manager
    assert manager.producer_groups == {PID: {"g"}}
    broker.state.replicas.stop_replicas([(OFFSETS_TOPIC, P)], delete=False)
    assert manager.producer_groups == {}
    assert set(commit_errors(txn_commit(broker, "g", {("t", 0): 11}, PID)).values()) == {
        E.NOT_COORDINATOR
    }
