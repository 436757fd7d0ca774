"""How much a Fetch answer carries (docs/contracts/fetch.md, "Size limits"): the pure
budget, the log's read with and without the first-batch exception, and whole answers
through the dispatcher (no sockets) for consumers, followers and incremental sessions,
with exact byte counts."""

from __future__ import annotations

import pytest

from broker.protocol.apis import FETCH
from broker.records.batch import iter_batches
from broker.server.fetch_session import FetchSessionCache
from broker.server.handlers.fetch import ResponseBudget
from tests.helpers.log_batches import append, batch, open_log
from tests.helpers.server_requests import create, produce, values

# -- the budget, alone ---------------------------------------------------------------------


def answer_sizes(max_bytes: int, partitions: list[tuple[int, list[int]]]) -> list[int]:
    """What each partition takes, given (partition_max_bytes, its batch sizes) in answer
    order, reading whole batches as the log does."""
    budget = ResponseBudget(max_bytes)
    taken = []
    for partition_max, batches in partitions:
        limit, size = budget.limit(partition_max), 0
        for i, batch_size in enumerate(batches):
            if size + batch_size <= limit or (i == 0 and budget.min_one):
                size += batch_size
                if size > limit:  # the first-batch exception: that batch alone
                    break
            else:
                break
        budget.took(size)
        taken.append(size)
    return taken


@pytest.mark.parametrize(
    ("max_bytes", "partitions", "expected"),
    [
        # Each partition to its own limit, then what the answer has left.
        (10_000, [(3_000, [1_000] * 5), (3_000, [1_000] * 5), (9_000, [1_000] * 9)],
         [3_000, 3_000, 4_000]),
        # A first batch over both limits comes whole, alone, and ends the answer.
        (5_000, [(2_000, [8_000, 100]), (2_000, [100])], [8_000, 0]),
        # Over the partition's limit only: it comes whole, the rest of max_bytes still serves.
        (10_000, [(2_000, [3_000, 100]), (5_000, [1_000] * 9)], [3_000, 5_000]),
        # Once a partition returned records, a batch that does not fit brings nothing
        # (the user's case: one full partition, then a large batch elsewhere).
        (1_000_000, [(1_048_576, [400_000, 400_000, 400_000]), (1_048_576, [800_000])],
         [800_000, 0]),
        # An empty partition (or one with an error) does not end the exception.
        (5_000, [(2_000, []), (2_000, [6_000]), (2_000, [10])], [0, 6_000, 0]),
        # Zero limits: progress still (one batch), never more.
        (0, [(0, [500, 500]), (0, [500])], [500, 0]),
    ],
)  # fmt: skip
def test_the_budget_decides_each_partitions_share(max_bytes, partitions, expected):
    assert answer_sizes(max_bytes, partitions) == expected


def test_the_budget_never_goes_negative():
    budget = ResponseBudget(100)
    assert budget.limit(1_000) == 100 and budget.min_one
    budget.took(300)  # the exception took more than there was
    assert (budget.remaining, budget.min_one, budget.limit(1_000)) == (0, False, 0)
    assert ResponseBudget(-5).limit(10) == 0


# -- the log's read ------------------------------------------------------------------------


def test_a_first_batch_that_does_not_fit_comes_only_with_min_one(tmp_path):
    log = open_log(tmp_path)
    try:
        big, small = batch(1, value_size=3_000), batch(1)
        append(log, big, small, small)
        assert log.read(0, 1_000, min_one=True).size == len(big)
        assert log.read(0, 1_000, min_one=False).regions == []
        assert log.read(0, 0, min_one=False).size == 0
        assert log.read(1, 1_000, min_one=False).size == 2 * len(small)
        assert log.read(1, 2 * len(small) - 1, min_one=False).size == len(small)
    finally:
        log.close()


# -- whole answers through the dispatcher --------------------------------------------------


def fetch_body(
    named: list[tuple[int, int, int]], max_bytes: int, replica_id=-1, session=(0, -1)
) -> dict:
    """A fetch of topic t: (partition, offset, partition_max_bytes) in order."""
    return {
        "replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": session[0], "session_epoch": session[1],
        "topics": [{"topic": "t", "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": o,
             "log_start_offset": -1, "partition_max_bytes": m}
            for p, o, m in named
        ]}] if named else [],
        "forgotten_topics_data": [], "rack_id": "",
    }  # fmt: skip


def taken(response: dict) -> dict[int, list[int]]:
    """Per partition answered: the sizes of the whole batches it carries."""
    out = {}
    for t in response["responses"]:
        for p in t["partitions"]:
            data = bytes(p["records"])
            sizes = [h.size for _, h in iter_batches(data)]
            assert sum(sizes) == len(data), "batches are never cut"
            out[p["partition_index"]] = sizes
    return out


@pytest.fixture
def loaded(broker):
    """Topic t: partition 0 ten 1,000-byte batches, 1 a 5,000-byte batch then two small,
    2 ten small ones. Returns the batch sizes."""
    create(broker, "t", partitions=3)
    kb, big, small = values(b"a" * 930), values(b"b" * 4_930), values(b"c" * 130)
    assert (len(kb), len(big), len(small)) == (1_000, 5_000, 200)
    for _ in range(10):
        produce(broker, "t", kb, partition=0)
        produce(broker, "t", small, partition=2)
    for raw in (big, small, small):
        produce(broker, "t", raw, partition=1)
    return broker


@pytest.mark.parametrize("replica_id", [-1, 1], ids=["consumer", "follower"])
def test_max_bytes_bounds_the_answer_and_a_late_big_batch_waits(loaded, replica_id):
    body = fetch_body([(0, 0, 3_500), (1, 0, 3_500), (2, 0, 3_500)], 4_000, replica_id)
    # p0 takes 3 batches (3,000); p1's 5,000-byte batch does not fit the 1,000 left;
    # p2 takes 1,000 more: the answer is exactly max_bytes.
    assert taken(loaded.call(FETCH, 11, body)) == {0: [1_000] * 3, 1: [], 2: [200] * 5}


@pytest.mark.parametrize("replica_id", [-1, 1], ids=["consumer", "follower"])
def test_the_first_partition_with_data_gets_its_big_batch_whole(loaded, replica_id):
    body = fetch_body([(1, 0, 3_500), (0, 0, 3_500), (2, 0, 3_500)], 4_000, replica_id)
    assert taken(loaded.call(FETCH, 11, body)) == {1: [5_000], 0: [], 2: []}
    # Over the partition's limit but not the answer's: the rest still serves others.
    body = fetch_body([(1, 0, 3_500), (0, 0, 3_500), (2, 0, 3_500)], 6_500, replica_id)
    assert taken(loaded.call(FETCH, 11, body)) == {1: [5_000], 0: [1_000], 2: [200] * 2}
    # Past a partition's end, nothing is taken and the exception carries on.
    body = fetch_body([(2, 10, 100), (1, 0, 100)], 100, replica_id)
    assert taken(loaded.call(FETCH, 11, body)) == {2: [], 1: [5_000]}


def test_an_incremental_session_rotates_so_a_big_batch_is_not_starved(loaded):
    """p0 and p2 always have more than the answer holds, in front of p1, whose 5,000-byte
    batch never fits behind them: the session moves partitions that got records to the
    back, so p1 comes first within a few fetches and gets its batch; every answer stays
    within max_bytes except that one."""
    limit = 2_500
    named = [(0, 0, 2_000), (1, 0, 2_000), (2, 0, 2_000)]
    response = loaded.call(FETCH, 11, fetch_body(named, limit, session=(0, 0)))
    session_id, epoch = response["session_id"], 1
    assert session_id
    offsets, answers = {0: 0, 1: 0, 2: 0}, []
    got = taken(response)
    while True:
        answers.append(got)
        for p, sizes in got.items():
            offsets[p] += len(sizes)  # one record per batch
        if offsets[1] or len(answers) > 6:
            break
        moved = [(p, offsets[p], 2_000) for p, sizes in got.items() if sizes]
        body = fetch_body(moved, limit, session=(session_id, epoch))
        got = taken(loaded.call(FETCH, 11, body))
        epoch += 1
    assert offsets[1] == 1, answers
    assert len(answers) <= 3, answers
    for got in answers:
        total = sum(sum(s) for s in got.values())
        assert total <= limit or got.get(1) == [5_000], got


def test_session_news_keep_their_place_and_served_ones_go_to_the_back():
    c = FetchSessionCache(new_id=lambda: 7)
    named = [{"partition": p, "fetch_offset": 0, "partition_max_bytes": 1} for p in range(4)]
    fetch = c.new_fetch(
        {"session_id": 0, "session_epoch": 0, "topics": [{"topic": "t", "partitions": named}]},
        privileged=False,
        now_ms=0,
    )
    session = fetch.session
    assert list(session.news) == [("t", 0), ("t", 1), ("t", 2), ("t", 3)]
    session.settle(("t", 0), (1, 1, 0), more=True, sent=True)  # returned records, more left
    session.settle(("t", 1), (1, 1, 0), more=True, sent=False)  # left out: answer full
    session.settle(("t", 2), (1, 1, 0), more=False, sent=True)  # all taken
    c.partition_changed(("t", 1))  # news again: keeps its place
    c.partition_changed(("t", 2))  # back among the news: at the end
    assert list(session.news) == [("t", 1), ("t", 3), ("t", 0), ("t", 2)]
