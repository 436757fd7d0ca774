"""The group consumer against our broker and librdkafka's mock cluster (both have a group
coordinator): subscribe, rebalances and their callbacks, commits, positions, patterns, and
groups shared with kafka-python and confluent-kafka members on the same assignor."""

from __future__ import annotations

import threading
import time

import pytest

from broker.client.group import (
    CommitFailedError,
    GroupConsumer,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    RebalanceListener,
    TopicPartition,
)
from broker.client.producer import Producer
from broker.config.definition import ConfigError
from broker.processes import BrokerProcess
from broker.protocol.errors import FencedInstanceIdError, InvalidGroupIdError
from tests.helpers.group_members import (
    HEARTBEAT_INTERVAL_MS,
    MEMBER_KINDS,
    SESSION_TIMEOUT_MS,
    GroupWatch,
)
from tests.helpers.mock_cluster import Kafka

TP = TopicPartition


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """Our broker, taking the short session timeouts the tests use (Kafka's minimum is 6 s)
    and starting a group's first rebalance at once."""
    overrides = {"group.min.session.timeout.ms": "1000", "group.initial.rebalance.delay.ms": "0"}
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "logs", overrides) as b:
        yield b


_groups = iter(range(1_000_000))


def new_group() -> str:
    return f"g-{time.monotonic_ns()}-{next(_groups)}"


def consumer(kafka: Kafka, group: str | None, **settings) -> GroupConsumer:
    settings.setdefault("session_timeout_ms", SESSION_TIMEOUT_MS)
    settings.setdefault("heartbeat_interval_ms", HEARTBEAT_INTERVAL_MS)
    settings.setdefault("auto_offset_reset", "earliest")
    return GroupConsumer(kafka.bootstrap, group_id=group, **settings)


def produce(
    kafka: Kafka, topic: str, count: int, start: int = 0, partition: int | None = None
) -> dict[TopicPartition, int]:
    """`count` keyed records (to `partition`, or by key); how many went to each partition.
    (Topics on the mock have 4 partitions whatever was asked.)"""
    per_partition: dict[TopicPartition, int] = {}
    with Producer(kafka.bootstrap) as producer:
        futures = [
            producer.send(topic, f"v{i}".encode(), key=f"k{i}".encode(), partition=partition)
            for i in range(start, start + count)
        ]
        for f in futures:
            meta = f.result(timeout=30)
            tp = TP(meta.topic, meta.partition)
            per_partition[tp] = per_partition.get(tp, 0) + 1
    return per_partition


def poll_until(consumers, done, timeout_s=30.0) -> list:
    """Poll every consumer in turn until done(records so far) or the timeout."""
    got: list = []
    deadline = time.monotonic() + timeout_s
    while not done(got):
        assert time.monotonic() < deadline, f"gave up with {len(got)} records"
        for c in consumers:
            got += c.poll(0.1)
    return got


class Polling:
    """Each consumer polls on a thread of its own, as applications run them (one thread
    taking turns with several members' poll() slows every rebalance down to its turns)."""

    def __init__(self, *consumers: GroupConsumer):
        self.consumers = consumers
        self.records: list = []
        self.errors: list[Exception] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(c,)) for c in consumers]

    def _run(self, c: GroupConsumer) -> None:
        try:
            while not self._stop.is_set():
                self.records += c.poll(0.1)
        except Exception as exc:
            self.errors.append(exc)

    def __enter__(self) -> Polling:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    def wait(self, done, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            if self.errors:
                raise self.errors[0]
            assert time.monotonic() < deadline, "condition not reached in time"
            time.sleep(0.05)


class Recorder(RebalanceListener):
    def __init__(self):
        self.events: list[tuple[str, set]] = []

    def on_partitions_assigned(self, partitions):
        self.events.append(("assigned", set(partitions)))

    def on_partitions_revoked(self, partitions):
        self.events.append(("revoked", set(partitions)))

    def on_partitions_lost(self, partitions):
        self.events.append(("lost", set(partitions)))


# --- one member ----------------------------------------------------------------------


def test_subscribe_consumes_every_partition_and_commits(kafka):
    topic = kafka.new_topic(4)
    counts = produce(kafka, topic, 60)
    group = new_group()
    with consumer(kafka, group, enable_auto_commit=False) as c:
        c.subscribe([topic])
        got = poll_until([c], lambda g: len(g) >= 60)
        assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(60))
        assert {TP(r.topic, r.partition) for r in got} == set(c.assignment())
        for tp, n in counts.items():
            assert c.position(tp) == n
        assert all(o is None for o in c.committed(c.assignment()).values())
        c.commit()
        committed = c.committed(c.assignment())
        assert {tp: o.offset for tp, o in committed.items()} == counts
        # The leader epoch of the last consumed record goes with the offset.
        epochs = {TP(r.topic, r.partition): r.leader_epoch for r in got}
        assert {tp: o.leader_epoch for tp, o in committed.items()} == epochs

    produce(kafka, topic, 10, start=60)
    with consumer(kafka, group) as again:
        again.subscribe(topic)
        got = poll_until([again], lambda g: len(g) >= 10)
        assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(60, 70))


def test_auto_commit_on_close_and_a_new_member_resumes_there(kafka):
    topic = kafka.new_topic(2)
    produce(kafka, topic, 20)
    group = new_group()
    with consumer(kafka, group, auto_commit_interval_ms=60_000) as c:
        c.subscribe([topic])
        poll_until([c], lambda g: len(g) >= 20)
    produce(kafka, topic, 5, start=20)
    with consumer(kafka, group) as c:
        c.subscribe([topic])
        got = poll_until([c], lambda g: len(g) >= 5)
        time.sleep(0.3)
        got += c.poll(0.5)
        assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(20, 25))


def test_periodic_auto_commit(kafka):
    topic = kafka.new_topic(1)
    produce(kafka, topic, 5, partition=0)
    group = new_group()
    with consumer(kafka, group, auto_commit_interval_ms=100) as c:
        c.subscribe([topic])
        poll_until([c], lambda g: len(g) >= 5)
        deadline = time.monotonic() + 10
        while c.committed([TP(topic, 0)])[TP(topic, 0)] is None:
            assert time.monotonic() < deadline, "no auto commit"
            c.poll(0.1)
        assert c.committed([TP(topic, 0)])[TP(topic, 0)].offset == 5


def test_auto_offset_reset_latest_and_none(kafka):
    topic = kafka.new_topic(1)
    produce(kafka, topic, 3, partition=0)
    with consumer(kafka, new_group(), auto_offset_reset="latest") as c:
        c.subscribe([topic])
        assert poll_until([c], lambda g: bool(c.assignment())) == []
        assert c.position(TP(topic, 0)) == 3
        produce(kafka, topic, 1, start=3, partition=0)
        got = poll_until([c], lambda g: len(g) >= 1)
        assert [r.value for r in got] == [b"v3"]
    with consumer(kafka, new_group(), auto_offset_reset="none") as c:
        c.subscribe([topic])
        with pytest.raises(NoOffsetForPartitionError, match=f"{topic}-0"):
            poll_until([c], lambda g: False, timeout_s=20)


def test_seek_position_and_seek_to_beginning_and_end(kafka):
    topic = kafka.new_topic(1)
    produce(kafka, topic, 10, partition=0)
    tp = TP(topic, 0)
    with consumer(kafka, new_group(), max_poll_records=3) as c:
        c.subscribe([topic])
        got = poll_until([c], lambda g: len(g) >= 3)
        assert [r.offset for r in got] == [0, 1, 2]  # max_poll_records
        c.seek(tp, 7)
        assert c.position(tp) == 7
        assert [r.offset for r in poll_until([c], lambda g: len(g) >= 3)] == [7, 8, 9]
        c.seek_to_beginning()
        assert c.position(tp) == 0
        c.seek_to_end([tp])
        assert c.position(tp) == 10


def test_assign_commits_outside_the_group(kafka):
    topic = kafka.new_topic(2)
    produce(kafka, topic, 6, partition=0)
    produce(kafka, topic, 6, start=6, partition=1)
    group = new_group()
    with consumer(kafka, group, enable_auto_commit=False) as c:
        c.assign([(topic, 0), (topic, 1)])
        poll_until([c], lambda g: len(g) >= 12)
        c.commit({TP(topic, 0): 2, (topic, 1): OffsetAndMetadata(3, "note")})
    with consumer(kafka, group) as c:
        committed = c.committed([(topic, 0), (topic, 1)])
        assert committed[TP(topic, 0)].offset == 2
        assert committed[TP(topic, 1)][:2] == (3, "note")
        c.assign([TP(topic, 1)])
        got = poll_until([c], lambda g: len(g) >= 3)
        assert [r.offset for r in got] == [3, 4, 5]


def test_pattern_subscription_follows_new_topics(kafka):
    prefix = f"pat{time.monotonic_ns()}"
    first = kafka.new_topic(1, prefix=prefix)
    listener = Recorder()
    with consumer(kafka, new_group(), metadata_max_age_ms=300) as c:
        c.subscribe(pattern=f"{prefix}-.*", listener=listener)
        poll_until([c], lambda g: bool(c.assignment()))
        assert c.subscription() == {first}
        second = kafka.new_topic(1, prefix=prefix)
        kafka.new_topic(1, prefix="other")
        produce(kafka, second, 2)
        got = poll_until([c], lambda g: len(g) >= 2)
        assert {r.topic for r in got} == {second}
        assert c.subscription() == {first, second}


# --- rebalances --------------------------------------------------------------------


def test_eager_members_revoke_everything_and_share_the_partitions(kafka):
    topic = kafka.new_topic(4)
    all_four = {TP(topic, p) for p in range(4)}
    group = new_group()
    listeners = [Recorder(), Recorder()]
    a = consumer(kafka, group, partition_assignment_strategy="range")
    b = consumer(kafka, group, partition_assignment_strategy="range")
    try:
        a.subscribe([topic], listener=listeners[0])
        poll_until([a], lambda g: a.assignment() == all_four)
        b.subscribe([topic], listener=listeners[1])
        with Polling(a, b) as polling:
            polling.wait(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2)
        assert a.assignment() | b.assignment() == all_four
        assert listeners[0].events[:3] == [
            ("assigned", all_four),
            ("revoked", all_four),
            ("assigned", a.assignment()),
        ]
        assert listeners[1].events == [("assigned", b.assignment())]
        gone = b.assignment()
        b.close()
        assert listeners[1].events[-1] == ("revoked", gone)
        poll_until([a], lambda g: a.assignment() == all_four)
    finally:
        a.close()
        b.close()


def test_cooperative_members_revoke_only_what_moves(kafka):
    topic = kafka.new_topic(4)
    all_four = {TP(topic, p) for p in range(4)}
    group = new_group()
    listeners = [Recorder(), Recorder()]
    a = consumer(kafka, group, partition_assignment_strategy="cooperative-sticky")
    b = consumer(kafka, group, partition_assignment_strategy="cooperative-sticky")
    try:
        a.subscribe([topic], listener=listeners[0])
        poll_until([a], lambda g: a.assignment() == all_four)
        b.subscribe([topic], listener=listeners[1])
        with Polling(a, b) as polling:
            polling.wait(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2)
        kept = a.assignment()
        moved = all_four - kept
        assert [e for e in listeners[0].events if e[1]] == [
            ("assigned", all_four),
            ("revoked", moved),  # only what moves; the rest stays assigned throughout
        ]
        assert [e for e in listeners[1].events if e[1]] == [("assigned", moved)]
    finally:
        a.close()
        b.close()


def test_a_held_join_stays_in_flight_across_polls(kafka):
    """The coordinator holds a newcomer's JoinGroup until the old member rejoins, which it
    does only when it polls: the newcomer's polls meanwhile return at their own timeout
    (not at the rebalance's end), and a later poll completes the join."""
    topic = kafka.new_topic(4)
    all_four = {TP(topic, p) for p in range(4)}
    group = new_group()
    a = consumer(kafka, group)
    b = consumer(kafka, group, max_poll_interval_ms=60_000)  # its join may be held 60 s
    try:
        a.subscribe([topic])
        poll_until([a], lambda g: a.assignment() == all_four)
        generation = a.group_metadata().generation_id
        b.subscribe([topic])
        for _ in range(3):  # a does not poll: the rebalance cannot end
            started = time.monotonic()
            assert b.poll(0.2) == []
            assert time.monotonic() - started < 10, "poll() waited for the rebalance"
            assert b.assignment() == set() and b.group_metadata().generation_id == -1
        with Polling(a, b) as polling:
            polling.wait(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2)
        assert a.assignment() | b.assignment() == all_four
        # A single rebalance took b in, while its polls came and went (our coordinator;
        # librdkafka's mock sometimes starts a second one on a loaded machine).
        assert a.group_metadata().generation_id == b.group_metadata().generation_id
        if kafka.kind == "ours":
            assert a.group_metadata().generation_id == generation + 1
        else:
            assert a.group_metadata().generation_id > generation
    finally:
        a.close()
        b.close()


def test_a_member_that_stops_polling_leaves_and_loses_its_partitions(kafka):
    topic = kafka.new_topic(4)
    all_four = {TP(topic, p) for p in range(4)}
    group = new_group()
    stuck_listener = Recorder()
    stuck = consumer(kafka, group, max_poll_interval_ms=1500, enable_auto_commit=False)
    other = consumer(kafka, group)
    try:
        stuck.subscribe([topic], listener=stuck_listener)
        poll_until([stuck], lambda g: stuck.assignment() == all_four)
        other.subscribe([topic])
        # Only `other` polls: `stuck` misses the rebalance, its heartbeat thread sees the
        # poll timeout and leaves, and the group goes on without it.
        poll_until([other], lambda g: other.assignment() == all_four, timeout_s=40)
        with pytest.raises(CommitFailedError):
            stuck.commit({TP(topic, 0): 0})
        stuck.poll(0.1)
        assert ("lost", all_four) in stuck_listener.events
    finally:
        stuck.close()
        other.close()


# --- static membership ---------------------------------------------------------------


def test_a_static_member_restarted_within_its_session_timeout_causes_no_rebalance(kafka):
    kafka.lacks("static membership (a static member rejoining under a new member id rebalances)")
    topic = kafka.new_topic(4)
    group = new_group()
    static = {"session_timeout_ms": 10_000}
    other = Recorder()
    a = consumer(kafka, group, group_instance_id="member-a", **static)
    b = consumer(kafka, group, group_instance_id="member-b", **static)
    # a joins alone first, so that b's arrival makes it rejoin: the group has rebalanced
    # since a's first JoinGroup, as any group that has run for a while.
    a.subscribe([topic])
    poll_until([a], lambda g: len(a.assignment()) == 4)
    b.subscribe([topic], listener=other)
    with Polling(a, b) as polling:
        polling.wait(
            lambda: (
                len(a.assignment()) == 2
                and len(b.assignment()) == 2
                and a.group_metadata().generation_id == b.group_metadata().generation_id
            )
        )
    kept, events = a.assignment(), list(other.events)
    generation, old_member = a.group_metadata()[1:3]
    assert b.group_metadata().generation_id == generation
    a.close()  # a static member does not leave: its session keeps its place
    again = consumer(kafka, group, group_instance_id="member-a", **static)
    again.subscribe([topic])
    try:
        with Polling(again, b) as polling:
            polling.wait(lambda: again.assignment() == kept)
        # Back in the generation it left, with its partitions: no rebalance happened
        # (one would have made a new generation and called b's listener).
        assert again.group_metadata().generation_id == generation
        assert again.group_metadata().member_id not in ("", old_member)
        assert b.group_metadata().generation_id == generation
        assert other.events == events, "the other member saw a rebalance"
        assert b.assignment() | kept == {TP(topic, p) for p in range(4)}
    finally:
        again.close()
        b.close()


def test_a_static_member_replaced_by_another_process_is_fenced(kafka):
    kafka.lacks("static membership (it fences no group.instance.id)")
    topic = kafka.new_topic(2)
    group = new_group()
    old = consumer(kafka, group, group_instance_id="only-one", session_timeout_ms=10_000)
    new = consumer(kafka, group, group_instance_id="only-one", session_timeout_ms=10_000)
    try:
        old.subscribe([topic])
        poll_until([old], lambda g: len(old.assignment()) == 2)
        new.subscribe([topic])
        poll_until([new], lambda g: len(new.assignment()) == 2)
        with pytest.raises(FencedInstanceIdError):
            poll_until([old], lambda g: False, timeout_s=10)
        with pytest.raises(FencedInstanceIdError):
            old.poll(0)  # fatal: every later call says so
    finally:
        old.close()
        new.close()


# --- groups of several clients ----------------------------------------------------------


# The first member joins alone and leads the group; then the others join; then the
# leader leaves (leadership passes to another member) and one of ours joins. On the mock
# kafka-python must lead whenever it takes part: as a follower it gets INVALID_REQUEST
# from the mock's SyncGroup now and then (also with librdkafka alone leading it), so the
# mixes where it follows run against our broker only.
MIXES = [
    ("range", ["kafka-python", "ours", "confluent"]),
    ("range", ["confluent", "ours", "ours"]),
    ("roundrobin", ["kafka-python", "ours", "confluent"]),
    ("sticky", ["kafka-python", "ours", "ours"]),  # librdkafka has no eager sticky
    ("cooperative-sticky", ["kafka-python", "ours", "confluent"]),
    ("cooperative-sticky", ["confluent", "ours", "ours"]),
    ("range", ["ours", "kafka-python", "confluent"]),
    ("cooperative-sticky", ["ours", "kafka-python", "confluent"]),
]
# The mixes run against the mock too: one eager, one cooperative, each with all three
# clients. The assignors run in the clients, so which one leads or assigns is the same
# code on either cluster (all mixes run on our broker); what the mock adds is another
# coordinator's JoinGroup/SyncGroup, and each rebalance there waits its full timer
# (the session timeout less a second), which made every mix cost 15-22 s.
MOCK_MIXES = [
    ("range", ["kafka-python", "ours", "confluent"]),
    ("cooperative-sticky", ["kafka-python", "ours", "confluent"]),
]


@pytest.mark.parametrize(
    "assignor, kinds", MIXES, ids=[f"{a}-{kinds[0]}-leads" for a, kinds in MIXES]
)
def test_mixed_group_shares_partitions_and_commits(kafka, assignor, kinds):
    """Members of three clients in one group, led by another client's member, then by
    another: every partition has one owner at a time, every record is consumed once, and
    members hand partitions over at the offsets the others committed."""
    if "kafka-python" in kinds[1:]:
        kafka.lacks("kafka-python following another leader (its SyncGroup: INVALID_REQUEST)")
    if kafka.mock is not None and (assignor, kinds) not in MOCK_MIXES:
        pytest.skip("on the mock, MOCK_MIXES only: the other mixes differ in client code only")
    topic = kafka.new_topic(4)
    partitions = {TP(topic, p) for p in range(4)}
    group = new_group()
    watch = GroupWatch()
    members = [
        MEMBER_KINDS[kind](
            f"{kind}-{i}",
            watch,
            kafka.bootstrap,
            group,
            topic,
            assignor,
            **settings_for(kafka, kind),
        )
        for i, kind in enumerate(kinds)
    ]
    joiner = MEMBER_KINDS["ours"]("ours-late", watch, kafka.bootstrap, group, topic, assignor)
    running = [members[0].start()]
    expected: set = set()
    sent = 0

    def produce_and_check(count):
        nonlocal sent
        produce(kafka, topic, count, start=sent)
        sent += count
        ends = end_offsets(kafka, topic)
        expected.update((tp.topic, tp.partition, o) for tp, n in ends.items() for o in range(n))
        watch.wait_consumed(expected)

    try:
        watch.wait_stable(running, partitions)  # the first member leads
        running += [m.start() for m in members[1:]]
        watch.wait_stable(running, partitions)
        produce_and_check(100)
        running.pop(0).stop()  # the leader leaves cleanly
        watch.wait_stable(running, partitions)
        produce_and_check(100)
        running.append(joiner.start())
        watch.wait_stable(running, partitions)
        produce_and_check(100)
    finally:
        for m in running:
            m.stop()
    watch.raise_errors()
    assert watch.overlaps == []
    assert watch.strays == []
    # Commits after each poll: what a member consumed, the next owner does not consume
    # again (the offsets committed by one client are read by the others).
    # (Except records whose commit the group refused while it rebalanced: at least once.)
    twice = {k: v for k, v in watch.consumed.items() if len(v) > 1 and k not in watch.refused}
    assert not twice, f"consumed twice: {sorted(twice.items())[:5]}"
    with consumer(kafka, group) as c:
        committed = c.committed(sorted(partitions))
    assert {tp: o.offset if o else 0 for tp, o in committed.items()} == end_offsets(kafka, topic)


def settings_for(kafka: Kafka, kind: str) -> dict:
    # kafka-python 3 asks ApiVersions v3 when it may, which the mock answers with an error
    # body it cannot decode (and it does not step down): told the broker is 2.3, it asks v2.
    if kind == "kafka-python" and kafka.mock is not None:
        return {"api_version": (2, 3)}
    return {}


def end_offsets(kafka: Kafka, topic: str) -> dict[TopicPartition, int]:
    from broker.client.simple_consumer import SimpleConsumer

    with SimpleConsumer(kafka.bootstrap) as s:
        return {TP(topic, p): s.latest_offset(topic, p) for p in s.partitions_for(topic)}


# --- settings and misuse ----------------------------------------------------------------


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            {"session_timeout_ms": "soon"},
            "Invalid value 'soon' for configuration session.timeout.ms",
        ),
        (
            {"auto_offset_reset": "smallest"},
            "configuration auto.offset.reset: value must be one of",
        ),
        ({"partition_assignment_strategy": "fair"}, "unknown assignor 'fair'"),
        ({"partition_assignment_strategy": ["sticky", "cooperative-sticky"]}, None),
        (
            {"heartbeat_interval_ms": 10_000, "session_timeout_ms": 6_000},
            "below session.timeout.ms",
        ),
        ({"max_poll_records": 0}, "configuration max.poll.records: value must be at least 1"),
        ({"enable_auto_commit": 1}, "enable.auto.commit: expected a boolean"),
        ({"group_idd": "x"}, "Unknown configuration 'group_idd'"),
    ],
)
def test_bad_settings_name_the_key_and_value(kafka, settings, message):
    if message is None:  # eager and cooperative assignors share the eager protocol: fine
        GroupConsumer(kafka.bootstrap, **settings).close()
        return
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        GroupConsumer(kafka.bootstrap, **settings)


def test_configuration_reference_lists_the_consumer_settings():
    from pathlib import Path

    from broker.client.group.config import CONSUMER_CONFIG

    text = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    assert CONSUMER_CONFIG.to_markdown() in text, "regenerate: docs/gen_configuration.sh"


def test_misuse_is_refused(kafka):
    topic = kafka.new_topic(1)
    with consumer(kafka, None) as c:
        with pytest.raises(InvalidGroupIdError, match="subscribe\\(\\) needs a group_id"):
            c.subscribe([topic])
        with pytest.raises(ValueError, match="poll\\(\\) needs subscribe\\(\\) or assign\\(\\)"):
            c.poll(0)
        c.assign([(topic, 0)])
        with pytest.raises(InvalidGroupIdError):
            c.commit()
    with consumer(kafka, new_group()) as c:
        c.subscribe([topic])
        with pytest.raises(ValueError, match="do not mix"):
            c.assign([(topic, 0)])
