"""Group API requests as a client sends them (`*_body`: bodies keyed as the API
declarations, also sent to broker processes over `BrokerConnection`), and for the
in-process coordinator tests their answers decoded, waiting answers (JoinGroup, SyncGroup)
checked after the test moves the clock or another member acts."""

from __future__ import annotations

from broker.protocol.apis import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SYNC_GROUP,
    TXN_OFFSET_COMMIT,
)
from broker.protocol.consumer_protocol import encode_subscription
from tests.helpers.inprocess_broker import InProcessBroker, Respond, Wait

# Group settings of the in-process coordinator tests (tests/coordinator/conftest.py).
DELAY = 3000  # group.initial.rebalance.delay.ms
SETTINGS = {
    "group.initial.rebalance.delay.ms": str(DELAY),
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "4",
}


def subscription(*topics: str) -> bytes:
    """A consumer subscription (v0) to `topics`."""
    return encode_subscription({"topics": list(topics)})


class Answer:
    """A request's answer: at once, or once the coordinator decides."""

    def __init__(self, broker: InProcessBroker, api: int, version: int, outcome) -> None:
        self.broker, self.api, self.version, self.outcome = broker, api, version, outcome

    def get(self) -> dict | None:
        outcome = self.outcome
        if isinstance(outcome, Wait):
            outcome = self.broker.answer_of(outcome)
            if outcome is None:
                return None
        assert isinstance(outcome, Respond), outcome
        return self.broker.decode(self.api, self.version, outcome)

    @property
    def done(self) -> bool:
        return self.get() is not None

    def result(self) -> dict:
        body = self.get()
        assert body is not None, "still waiting"
        return body


def ready(broker: InProcessBroker, group: str = "g") -> dict:
    """FindCoordinator until the offsets topic exists and its partitions are loaded (the
    creation and the loads run on the broker's loop)."""
    for _ in range(20):
        found = find_coordinator(broker, group)
        if found["error_code"] == 0:
            run_loop(broker)
            return found
        run_loop(broker)
    raise AssertionError(f"no coordinator: {found}")


def run_loop(broker: InProcessBroker) -> None:
    import asyncio

    for _ in range(5):
        broker.loop.run_until_complete(asyncio.sleep(0))


def find_coordinator(broker, key: str, version: int = 2, key_type: int = 0) -> dict:
    body = {"key": key, "key_type": key_type, "coordinator_keys": [key]}
    return broker.call(FIND_COORDINATOR, version, body)


def join_body(
    group: str = "g",
    member_id: str = "",
    *,
    instance: str | None = None,
    protocols: list[tuple[str, bytes]] | None = None,
    protocol_type: str = "consumer",
    session_ms: int = 10_000,
    rebalance_ms: int = 30_000,
) -> dict:
    """A JoinGroup body; by default a consumer subscribing to topic "t" with `range`."""
    return {
        "group_id": group,
        "session_timeout_ms": session_ms,
        "rebalance_timeout_ms": rebalance_ms,
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": protocol_type,
        "protocols": [
            {"name": n, "metadata": m}
            for n, m in (protocols if protocols is not None else [("range", subscription("t"))])
        ],
    }


def join(broker, group: str = "g", member_id: str = "", *, version: int = 5, **kw) -> Answer:
    body = join_body(group, member_id, **kw)
    return Answer(broker, JOIN_GROUP, version, broker.send(JOIN_GROUP, version, body))


def join_new(broker, group: str = "g", **kw) -> Answer:
    """A dynamic member's first join: MEMBER_ID_REQUIRED, then the join with that id."""
    first = join(broker, group, **kw).result()
    assert first["error_code"] == 79, first  # MEMBER_ID_REQUIRED
    return join(broker, group, first["member_id"], **kw)


def sync_body(
    group: str,
    generation: int,
    member_id: str,
    assignments: dict[str, bytes] | None = None,
    *,
    instance: str | None = None,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
) -> dict:
    return {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": protocol_type,
        "protocol_name": protocol_name,
        "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
    }


def sync(
    broker,
    group: str,
    generation: int,
    member_id: str,
    assignments: dict[str, bytes] | None = None,
    *,
    version: int = 3,
    **kw,
) -> Answer:
    body = sync_body(group, generation, member_id, assignments, **kw)
    return Answer(broker, SYNC_GROUP, version, broker.send(SYNC_GROUP, version, body))


def heartbeat_body(group: str, generation: int, member_id: str, instance=None) -> dict:
    return {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": instance,
    }


def heartbeat(broker, group: str, generation: int, member_id: str, instance=None) -> int:
    body = heartbeat_body(group, generation, member_id, instance)
    return broker.call(HEARTBEAT, 3, body)["error_code"]


def leave_body(group: str, member_id: str) -> dict:
    """A LeaveGroup v0-v2 body (one member)."""
    return {"group_id": group, "member_id": member_id}


def leave(broker, group: str, member_id: str) -> int:
    return broker.call(LEAVE_GROUP, 1, leave_body(group, member_id))["error_code"]


def leave_batch(broker, group: str, members: list[tuple[str, str | None]]) -> dict:
    body = {
        "group_id": group,
        "members": [{"member_id": m, "group_instance_id": i, "reason": None} for m, i in members],
    }
    return broker.call(LEAVE_GROUP, 3, body)


def commit_body(
    group: str,
    offsets: dict[tuple[str, int], int],
    generation: int = -1,
    member_id: str = "",
    metadata: str = "",
    instance: str | None = None,
) -> dict:
    """An OffsetCommit body (v7 fields) for `offsets`, (topic, partition) -> offset."""
    topics: dict[str, list] = {}
    for (t, p), offset in offsets.items():
        topics.setdefault(t, []).append(
            {
                "partition_index": p,
                "committed_offset": offset,
                "committed_leader_epoch": 3,
                "committed_metadata": metadata,
            }
        )
    return {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": instance,
        "retention_time_ms": -1,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }


def commit(broker, group: str, offsets, *args, version: int = 7, **kw) -> Answer:
    body = commit_body(group, offsets, *args, **kw)
    return Answer(broker, OFFSET_COMMIT, version, broker.send(OFFSET_COMMIT, version, body))


def partition_errors(body: dict) -> dict[tuple[str, int], int]:
    """(topic, partition) -> error code of an answer listing topics and their partitions
    (OffsetCommit, OffsetDelete)."""
    return {
        (t["name"], p["partition_index"]): p["error_code"]
        for t in body["topics"]
        for p in t["partitions"]
    }


def commit_errors(answer: Answer) -> dict[tuple[str, int], int]:
    return partition_errors(answer.result())


def txn_commit_body(
    group: str,
    offsets: dict[tuple[str, int], int],
    producer_id: int,
    producer_epoch: int = 0,
    generation: int = -1,
    member_id: str = "",
    instance: str | None = None,
    metadata: str = "",
    transactional_id: str = "txn",
) -> dict:
    """A TxnOffsetCommit body (v3 fields) for `offsets`, (topic, partition) -> offset."""
    body = commit_body(group, offsets, generation, member_id, metadata, instance)
    return {
        "transactional_id": transactional_id,
        "group_id": group,
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": instance,
        "topics": body["topics"],
    }


def txn_commit(broker, group: str, offsets, producer_id: int, *, version: int = 3, **kw) -> Answer:
    body = txn_commit_body(group, offsets, producer_id, **kw)
    return Answer(broker, TXN_OFFSET_COMMIT, version, broker.send(TXN_OFFSET_COMMIT, version, body))


def fetch_offsets(
    broker, group: str, partitions=None, version: int = 7, require_stable: bool = False
) -> dict:
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
    body = {"group_id": group, "topics": topics, "require_stable": require_stable}
    return broker.call(OFFSET_FETCH, version, body)


def committed(broker, group: str, partitions=None) -> dict[tuple[str, int], int]:
    answer = fetch_offsets(broker, group, partitions)
    assert answer["error_code"] == 0, answer
    return {
        (t["name"], p["partition_index"]): p["committed_offset"]
        for t in answer["topics"]
        for p in t["partitions"]
    }


def describe(broker, group: str, version: int = 4) -> dict:
    (described,) = broker.call(
        DESCRIBE_GROUPS, version, {"groups": [group], "include_authorized_operations": False}
    )["groups"]
    return described


def list_groups(broker, states: list[str] | None = None, version: int = 4) -> dict:
    return broker.call(LIST_GROUPS, version, {"states_filter": states or []})


def delete_groups(broker, *groups: str) -> Answer:
    body = {"groups_names": list(groups)}
    return Answer(broker, DELETE_GROUPS, 2, broker.send(DELETE_GROUPS, 2, body))


def delete_offsets(broker, group: str, partitions: list[tuple[str, int]]) -> Answer:
    by_topic: dict[str, list] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append({"partition_index": p})
    body = {
        "group_id": group,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }
    return Answer(broker, OFFSET_DELETE, 0, broker.send(OFFSET_DELETE, 0, body))


def stable_group(broker, group="g", members=2, **kw):
    """`members` dynamic members through one rebalance, the leader's assignment synced:
    (generation, [member ids], leader id). For a broker with SETTINGS."""
    joins = [join_new(broker, group, **kw) for _ in range(members)]
    broker.advance(DELAY)
    broker.advance(DELAY)  # a new member during the delay extends it once
    answers = [j.result() for j in joins]
    assert all(a["error_code"] == 0 for a in answers), answers
    generation = answers[0]["generation_id"]
    leader = answers[0]["leader"]
    ids = [a["member_id"] for a in answers]
    assignments = {m: f"assignment-of-{m}".encode() for m in ids}
    syncs = [sync(broker, group, generation, m, assignments if m == leader else None) for m in ids]
    assert all(s.result()["error_code"] == 0 for s in syncs)
    return generation, ids, leader
