"""The group coordinator in process: requests through the broker's real request handling,
__consumer_offsets on disk, a hand-driven clock for sessions and rebalance timeouts."""

from __future__ import annotations

from broker.coordinator.offsets_topic import OFFSETS_TOPIC, partition_for
from broker.protocol.errors import ErrorCode as E
from tests.helpers.groups import (
    DELAY,
    SETTINGS,
    commit,
    commit_errors,
    committed,
    delete_groups,
    delete_offsets,
    describe,
    fetch_offsets,
    find_coordinator,
    heartbeat,
    join,
    join_new,
    leave,
    leave_batch,
    list_groups,
    ready,
    run_loop,
    stable_group,
    subscription,
    sync,
)
from tests.helpers.inprocess_broker import InProcessBroker
from tests.helpers.server_requests import create

# -- joining ------------------------------------------------------------------------------


def test_a_new_member_first_gets_its_id_then_joins(broker):
    first = join(broker).result()
    assert first["error_code"] == E.MEMBER_ID_REQUIRED
    assert first["member_id"].startswith("test-")  # the client id, then a unique part
    second = join(broker, member_id=first["member_id"])
    assert not second.done  # the first rebalance of an empty group waits for more members
    broker.advance(DELAY)
    answer = second.result()
    assert answer["error_code"] == 0
    assert answer["generation_id"] == 1
    assert answer["leader"] == first["member_id"] == answer["member_id"]
    assert answer["protocol_name"] == "range"
    assert [m["member_id"] for m in answer["members"]] == [first["member_id"]]


def test_before_v4_a_member_joins_without_asking_for_an_id(broker):
    answer = join(broker, version=3)
    broker.advance(DELAY)
    assert answer.result()["error_code"] == 0
    assert answer.result()["member_id"]


def test_members_joining_together_share_one_generation(broker):
    generation, ids, leader = stable_group(broker, members=3)
    assert generation == 1
    described = describe(broker, "g")
    assert described["group_state"] == "Stable"
    assert described["protocol_type"] == "consumer"
    assert described["protocol_data"] == "range"
    assert {m["member_id"] for m in described["members"]} == set(ids)
    for m in described["members"]:
        assert m["member_assignment"] == f"assignment-of-{m['member_id']}".encode()
        assert m["member_metadata"] == subscription("t")
        assert m["client_host"] == "/127.0.0.1"


def test_only_the_leader_gets_the_members(broker):
    a = join_new(broker)
    b = join_new(broker)
    broker.advance(DELAY)
    broker.advance(DELAY)
    leader, follower = a.result(), b.result()
    assert leader["leader"] == leader["member_id"]
    assert len(leader["members"]) == 2 and follower["members"] == []


def test_a_follower_sync_waits_for_the_leader_assignment(broker):
    a, b = join_new(broker), join_new(broker)
    broker.advance(DELAY)
    broker.advance(DELAY)
    leader, follower = a.result(), b.result()
    gen = leader["generation_id"]
    waiting = sync(broker, "g", gen, follower["member_id"])
    assert not waiting.done
    # The leader leaves one member out.
    mine = sync(broker, "g", gen, leader["member_id"], {leader["member_id"]: b"L"})
    assert mine.result() == {**mine.result(), "error_code": 0, "assignment": b"L"}
    assert waiting.result()["error_code"] == 0
    # An empty consumer assignment (kafka-python cannot decode zero bytes).
    assert waiting.result()["assignment"] == bytes.fromhex("000000000000ffffffff")


def test_the_most_voted_common_protocol_is_chosen(broker):
    both = [("roundrobin", b"x"), ("range", b"y")]
    a = join_new(broker, protocols=both)
    b = join_new(broker, protocols=[("range", b"z"), ("roundrobin", b"w")])
    c = join_new(broker, protocols=both)
    broker.advance(DELAY)
    broker.advance(DELAY)
    assert {x.result()["protocol_name"] for x in (a, b, c)} == {"roundrobin"}


# -- heartbeats, leaving, failing ---------------------------------------------------------------


def test_heartbeats_keep_members_and_tell_them_to_rejoin(broker):
    gen, (a, b), _ = stable_group(broker)
    assert heartbeat(broker, "g", gen, a) == 0
    assert heartbeat(broker, "g", gen + 1, a) == E.ILLEGAL_GENERATION
    assert heartbeat(broker, "g", gen, "nobody") == E.UNKNOWN_MEMBER_ID
    assert heartbeat(broker, "nogroup", gen, a) == E.UNKNOWN_MEMBER_ID
    assert leave(broker, "g", b) == 0
    assert heartbeat(broker, "g", gen, b) == E.UNKNOWN_MEMBER_ID  # after leaving
    assert heartbeat(broker, "g", gen, a) == E.REBALANCE_IN_PROGRESS


def test_a_member_that_leaves_rebalances_the_group_at_once(broker):
    gen, (a, b), _ = stable_group(broker)
    assert leave(broker, "g", b) == 0
    rejoin = join(broker, member_id=a)
    answer = rejoin.result()  # everyone left has rejoined: no waiting
    assert answer["generation_id"] == gen + 1
    assert [m["member_id"] for m in answer["members"]] == [a]


def test_a_silent_member_is_removed_after_its_session_timeout(broker):
    gen, (a, b), _ = stable_group(broker, session_ms=5000)
    broker.advance(4000)
    assert heartbeat(broker, "g", gen, a) == 0
    broker.advance(1500)  # b: 5.5 s silent
    assert heartbeat(broker, "g", gen, a) == E.REBALANCE_IN_PROGRESS
    assert join(broker, member_id=a, session_ms=5000).result()["generation_id"] == gen + 1
    assert heartbeat(broker, "g", gen + 1, b) == E.UNKNOWN_MEMBER_ID


def test_members_that_do_not_rejoin_in_time_are_dropped(broker):
    gen, (a, b), leader = stable_group(broker, rebalance_ms=20_000)
    rejoin = join(broker, member_id=leader, rebalance_ms=20_000)
    assert not rejoin.done  # waits for the other member
    other = b if leader == a else a
    for _ in range(4):  # the other one heartbeats but never rejoins
        broker.advance(5000)
        assert heartbeat(broker, "g", gen, other) in (E.REBALANCE_IN_PROGRESS, E.UNKNOWN_MEMBER_ID)
    answer = rejoin.result()
    assert answer["generation_id"] == gen + 1
    assert [m["member_id"] for m in answer["members"]] == [leader]


def test_the_last_member_leaving_empties_the_group(broker):
    gen, (a,), _ = stable_group(broker, members=1)
    assert leave(broker, "g", a) == 0
    described = describe(broker, "g")
    assert described["group_state"] == "Empty" and described["members"] == []


def test_batch_leave_names_static_members_by_instance_id(broker):
    a = join(broker, instance="i-a")
    b = join(broker, instance="i-b")
    broker.advance(DELAY)
    broker.advance(DELAY)
    a_id, b_id = a.result()["member_id"], b.result()["member_id"]
    answer = leave_batch(broker, "g", [("", "i-a"), (b_id, "i-b"), ("x", "i-nobody")])
    assert answer["error_code"] == 0
    assert [m["error_code"] for m in answer["members"]] == [0, 0, E.UNKNOWN_MEMBER_ID]
    assert describe(broker, "g")["group_state"] == "Empty"  # both gone at once
    assert heartbeat(broker, "g", a.result()["generation_id"], a_id, instance="i-a") == (
        E.UNKNOWN_MEMBER_ID
    )


# -- static membership ------------------------------------------------------------------------


def test_a_static_member_restarting_keeps_its_assignment_without_a_rebalance(broker):
    a = join(broker, instance="i-a")
    b = join(broker, instance="i-b")
    broker.advance(DELAY)
    broker.advance(DELAY)
    answers = {x.result()["member_id"]: x.result() for x in (a, b)}
    gen = a.result()["generation_id"]
    leader = a.result()["leader"]
    assignments = {m: m.encode() for m in answers}
    for m in answers:
        sync(broker, "g", gen, m, assignments if m == leader else None, instance=None).result()
    old_b = b.result()["member_id"]
    # b restarts: a new process joins with its instance id and no member id.
    back = join(broker, instance="i-b").result()
    assert back["error_code"] == 0
    assert back["generation_id"] == gen  # no new generation
    new_b = back["member_id"]
    assert new_b != old_b
    assert describe(broker, "g")["group_state"] == "Stable"
    assert sync(broker, "g", gen, new_b, instance="i-b").result()["assignment"] == old_b.encode()
    # The old process is fenced.
    assert heartbeat(broker, "g", gen, old_b, instance="i-b") == E.FENCED_INSTANCE_ID
    assert heartbeat(broker, "g", gen, new_b, instance="i-b") == 0


def test_a_static_member_gone_past_its_session_is_removed(broker):
    a = join(broker, instance="i-a", session_ms=5000)
    b = join(broker, instance="i-b", session_ms=5000)
    broker.advance(DELAY)
    broker.advance(DELAY)
    gen = a.result()["generation_id"]
    a_id, b_id = a.result()["member_id"], b.result()["member_id"]
    for _ in range(3):  # b stays silent for 6 s
        broker.advance(2000)
        heartbeat(broker, "g", gen, a_id, instance="i-a")
    assert heartbeat(broker, "g", gen, a_id, instance="i-a") == E.REBALANCE_IN_PROGRESS
    assert heartbeat(broker, "g", gen, b_id, instance="i-b") == E.UNKNOWN_MEMBER_ID


# -- bad input: Kafka's error, and the group stays as it was ---------------------------------


def test_bad_joins_and_syncs_leave_the_group_consistent(broker):
    gen, (a, b), leader = stable_group(broker)
    before = describe(broker, "g")

    def still_stable():
        after = describe(broker, "g")
        assert after["group_state"] == "Stable"
        assert {m["member_id"] for m in after["members"]} == {
            m["member_id"] for m in before["members"]
        }

    assert join(broker, member_id="ghost").result()["error_code"] == E.UNKNOWN_MEMBER_ID
    still_stable()
    assert (
        join(broker, protocol_type="connect").result()["error_code"]
        == E.INCONSISTENT_GROUP_PROTOCOL
    )
    assert (
        join(broker, protocols=[("sticky", b"")]).result()["error_code"]
        == E.INCONSISTENT_GROUP_PROTOCOL
    )
    assert join(broker, protocols=[]).result()["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert join(broker, session_ms=10).result()["error_code"] == E.INVALID_SESSION_TIMEOUT
    huge = [("range", b"x" * 2_000_000)]
    assert join(broker, member_id="", protocols=huge).result()["error_code"] == E.MESSAGE_TOO_LARGE
    assert join(broker, group="").result()["error_code"] == E.INVALID_GROUP_ID
    still_stable()
    assert sync(broker, "g", gen + 5, a).result()["error_code"] == E.ILLEGAL_GENERATION
    assert sync(broker, "g", gen, "ghost").result()["error_code"] == E.UNKNOWN_MEMBER_ID
    wrong = sync(
        broker, "g", gen, a, version=5, protocol_type="consumer", protocol_name="roundrobin"
    )
    assert wrong.result()["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    still_stable()
    assert heartbeat(broker, "g", gen, a) == 0 and heartbeat(broker, "g", gen, b) == 0


def test_a_full_group_refuses_more_members(tmp_path):
    b = InProcessBroker(tmp_path / "logs", **SETTINGS, **{"group.max.size": "1"})
    ready(b)
    first = join_new(b)
    assert join(b).result()["error_code"] == E.GROUP_MAX_SIZE_REACHED
    b.advance(DELAY)
    assert first.result()["error_code"] == 0
    b.close()


# -- offsets ------------------------------------------------------------------------------------


def test_a_standalone_consumer_commits_and_fetches(broker):
    answer = commit(broker, "solo", {("t", 0): 5, ("t", 1): 7}, metadata="m")
    assert commit_errors(answer) == {("t", 0): 0, ("t", 1): 0}
    assert committed(broker, "solo", [("t", 0), ("t", 1), ("t", 2)]) == {
        ("t", 0): 5,
        ("t", 1): 7,
        ("t", 2): -1,  # nothing committed
    }
    assert committed(broker, "solo") == {("t", 0): 5, ("t", 1): 7}  # null topics: all
    fetched = fetch_offsets(broker, "solo", [("t", 0)])["topics"][0]["partitions"][0]
    assert (fetched["metadata"], fetched["committed_leader_epoch"]) == ("m", 3)
    assert committed(broker, "nobody", [("t", 0)]) == {("t", 0): -1}


def test_commits_check_member_and_generation(broker):
    gen, (a, b), _ = stable_group(broker)
    assert commit_errors(commit(broker, "g", {("t", 0): 1}, gen, a)) == {("t", 0): 0}
    assert commit_errors(commit(broker, "g", {("t", 0): 2}, gen - 1, a)) == {
        ("t", 0): E.ILLEGAL_GENERATION
    }
    assert commit_errors(commit(broker, "g", {("t", 0): 2}, gen, "ghost")) == {
        ("t", 0): E.UNKNOWN_MEMBER_ID
    }
    assert commit_errors(commit(broker, "g", {("t", 0): 2}, -1, "")) == {
        ("t", 0): E.UNKNOWN_MEMBER_ID  # a group with members takes no standalone commits
    }
    assert committed(broker, "g", [("t", 0)]) == {("t", 0): 1}  # the refused ones changed nothing


def test_commits_refused_per_partition(broker):
    answer = commit(broker, "solo", {("t", 0): 1, ("nope", 0): 1, ("t", 99): 1})
    assert commit_errors(answer) == {
        ("t", 0): 0,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 99): E.UNKNOWN_TOPIC_OR_PARTITION,
    }
    big = commit(broker, "solo", {("t", 1): 1}, metadata="x" * 5000)
    assert commit_errors(big) == {("t", 1): E.OFFSET_METADATA_TOO_LARGE}
    assert committed(broker, "solo") == {("t", 0): 1}


def test_a_commit_during_the_sync_is_refused(broker):
    a, b = join_new(broker), join_new(broker)
    broker.advance(DELAY)
    broker.advance(DELAY)
    gen, member = a.result()["generation_id"], b.result()["member_id"]
    assert commit_errors(commit(broker, "g", {("t", 0): 1}, gen, member)) == {
        ("t", 0): E.REBALANCE_IN_PROGRESS
    }


def test_flexible_versions_round_trip(broker):
    assert commit_errors(commit(broker, "flex", {("t", 0): 9}, version=8)) == {("t", 0): 0}
    answer = fetch_offsets(broker, "flex", [("t", 0)], version=6)
    assert answer["topics"][0]["partitions"][0]["committed_offset"] == 9
    assert join(broker, "flex2", version=7).result()["error_code"] == E.MEMBER_ID_REQUIRED


# -- restarts: everything comes back from __consumer_offsets ---------------------------------------


def test_groups_and_offsets_survive_a_restart(tmp_path):
    b = InProcessBroker(tmp_path / "logs", **SETTINGS)
    create(b, "t", partitions=4)
    ready(b)
    gen, (a, m2), leader = stable_group(b)
    commit(b, "g", {("t", 0): 11, ("t", 1): 12}, gen, a).result()
    commit(b, "solo", {("t", 2): 3}).result()
    commit(b, "solo", {("t", 2): 4}).result()  # the later commit wins
    b.close()

    again = InProcessBroker(tmp_path / "logs", **SETTINGS)
    run_loop(again)  # the offsets partitions load
    assert committed(again, "g", [("t", 0), ("t", 1)]) == {("t", 0): 11, ("t", 1): 12}
    assert committed(again, "solo") == {("t", 2): 4}
    described = describe(again, "g")
    assert described["group_state"] == "Stable"
    assert {m["member_id"] for m in described["members"]} == {a, m2}
    assert heartbeat(again, "g", gen, a) == 0  # members carry on with their generation
    again.close()


def test_requests_wait_while_the_partition_loads(tmp_path):
    b = InProcessBroker(tmp_path / "logs", **SETTINGS)
    create(b, "t")
    ready(b)
    commit(b, "solo", {("t", 0): 1}).result()
    b.close()
    again = InProcessBroker(tmp_path / "logs", **SETTINGS)
    # Leadership is taken at start; the load runs on the loop, which has not run yet.
    assert fetch_offsets(again, "solo", [("t", 0)])["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
    run_loop(again)
    assert committed(again, "solo", [("t", 0)]) == {("t", 0): 1}
    again.close()


def test_losing_leadership_unloads_the_groups(broker):
    joining = join_new(broker, "g")
    p = partition_for("g", 4)
    broker.state.replicas.stop_replicas([(OFFSETS_TOPIC, p)], delete=False)
    assert joining.result()["error_code"] == E.NOT_COORDINATOR
    assert fetch_offsets(broker, "g", [("t", 0)])["error_code"] == E.NOT_COORDINATOR
    assert join(broker, "g").result()["error_code"] == E.NOT_COORDINATOR


def test_a_new_leader_epoch_for_the_same_leader_keeps_the_groups(broker):
    """The controller bumps the leader epoch when a follower leaves the ISR; the leader
    stays, and so do its groups (a waiting join is not answered NOT_COORDINATOR)."""
    from broker.server.partition import Leadership
    from broker.server.replica_manager import PartitionDecision

    gen, (a, b), leader = stable_group(broker)
    rejoin = join(broker, member_id=leader)
    assert not rejoin.done
    p = partition_for("g", 4)
    partition = broker.state.replicas.get(OFFSETS_TOPIC, p)
    bumped = Leadership(0, partition.leader_epoch + 1, partition.isr, partition.replicas)
    broker.state.replicas.apply_leadership([PartitionDecision(OFFSETS_TOPIC, p, bumped)], {})
    run_loop(broker)
    assert not rejoin.done
    assert describe(broker, "g")["group_state"] == "PreparingRebalance"
    other = b if leader == a else a
    assert join(broker, member_id=other).result()["generation_id"] == gen + 1
    assert rejoin.result()["generation_id"] == gen + 1


# -- administration -------------------------------------------------------------------------------


def test_list_and_describe_groups(broker):
    stable_group(broker, "g1", members=1)
    commit(broker, "solo", {("t", 0): 1}).result()
    listed = {g["group_id"]: g for g in list_groups(broker)["groups"]}
    assert listed["g1"]["protocol_type"] == "consumer" and listed["g1"]["group_state"] == "Stable"
    assert listed["solo"]["protocol_type"] == "" and listed["solo"]["group_state"] == "Empty"
    only_empty = list_groups(broker, ["empty"])["groups"]
    assert [g["group_id"] for g in only_empty] == ["solo"]
    assert describe(broker, "unknown")["group_state"] == "Dead"


def test_delete_groups_only_when_empty(broker):
    gen, (a,), _ = stable_group(broker, members=1)
    commit(broker, "g", {("t", 0): 4}, gen, a).result()
    answer = delete_groups(broker, "g", "nobody").result()
    assert {r["group_id"]: r["error_code"] for r in answer["results"]} == {
        "g": E.NON_EMPTY_GROUP,
        "nobody": E.GROUP_ID_NOT_FOUND,
    }
    leave(broker, "g", a)
    assert delete_groups(broker, "g").result()["results"][0]["error_code"] == 0
    assert describe(broker, "g")["group_state"] == "Dead"
    assert committed(broker, "g", [("t", 0)]) == {("t", 0): -1}


def test_deleted_groups_stay_deleted_after_a_restart(tmp_path):
    b = InProcessBroker(tmp_path / "logs", **SETTINGS)
    create(b, "t")
    ready(b)
    commit(b, "solo", {("t", 0): 4}).result()
    assert delete_groups(b, "solo").result()["results"][0]["error_code"] == 0
    b.close()
    again = InProcessBroker(tmp_path / "logs", **SETTINGS)
    run_loop(again)
    assert committed(again, "solo", [("t", 0)]) == {("t", 0): -1}
    assert list_groups(again)["groups"] == []
    again.close()


def test_offset_delete_spares_topics_the_group_consumes(broker):
    gen, (a,), _ = stable_group(broker, members=1)
    commit(broker, "g", {("t", 0): 4, ("u", 0): 2}, gen, a).result()
    answer = delete_offsets(broker, "g", [("t", 0), ("u", 0)]).result()
    errors = {
        (t["name"], p["partition_index"]): p["error_code"]
        for t in answer["topics"]
        for p in t["partitions"]
    }
    assert errors == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0}
    assert committed(broker, "g") == {("t", 0): 4}
    assert (
        delete_offsets(broker, "nobody", [("t", 0)]).result()["error_code"] == E.GROUP_ID_NOT_FOUND
    )


def test_offsets_of_empty_groups_expire(broker):
    retention = broker.state.groups.config.offsets_retention_ms
    commit(broker, "solo", {("t", 0): 1}).result()
    gen, (a,), _ = stable_group(broker, members=1)
    commit(broker, "g", {("t", 0): 2}, gen, a).result()
    broker.advance(retention - 1000)
    leave(broker, "g", a)  # g empties now: its offsets live a full retention from here
    broker.advance(2000)
    assert broker.state.groups.expire_offsets() == 1  # solo's, past a retention since commit
    assert committed(broker, "solo") == {}
    assert "solo" not in {g["group_id"] for g in list_groups(broker)["groups"]}
    assert committed(broker, "g") == {("t", 0): 2}
    broker.advance(retention)
    assert broker.state.groups.expire_offsets() == 1
    assert committed(broker, "g") == {}


# -- FindCoordinator ---------------------------------------------------------------------------


def test_find_coordinator(broker):
    found = find_coordinator(broker, "g")
    assert (found["error_code"], found["node_id"], found["port"]) == (0, 0, 9092)
    batch = find_coordinator(broker, "g", version=4)
    assert [(c["key"], c["error_code"]) for c in batch["coordinators"]] == [("g", 0)]
    # Key type 1 is the transaction coordinator's (tests/transactions/test_wiring.py): its
    # first lookup creates __transaction_state.
    assert find_coordinator(broker, "g", key_type=1)["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    assert find_coordinator(broker, "g", key_type=2)["error_code"] == E.INVALID_REQUEST
    assert find_coordinator(broker, "")["error_code"] == E.INVALID_GROUP_ID


def test_the_offsets_topic_is_created_compacted_and_internal(tmp_path):
    b = InProcessBroker(tmp_path / "logs", **SETTINGS)
    assert find_coordinator(b, "g")["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    ready(b)
    assert b.state.metadata.partition_count(OFFSETS_TOPIC) == 4
    assert b.state.replicas.topic_configs.overrides(OFFSETS_TOPIC)["cleanup.policy"] == "compact"
    b.close()
