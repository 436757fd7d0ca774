"""The follower's side of fetch sessions: what each fetch of a replica fetcher names and
forgets, against a scripted leader (no sockets), counted per request."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from broker.protocol.errors import ErrorCode
from broker.server.replica_fetcher import FetcherSettings, ReplicaFetcher, ReplicaFetcherManager

SIZE = 1000


class FakeLog:
    def __init__(self) -> None:
        self.log_end_offset = 0
        self.log_start_offset = 0
        self.leader_epochs = SimpleNamespace(latest_epoch=lambda: -1)  # empty: no truncation


class FakePartition:
    def __init__(self) -> None:
        self.log = FakeLog()
        self.leader_epoch = 3
        self.high_watermark = 0
        self.isr = (0, 1, 2)

    def append_as_follower(self, records, now_ms) -> int:
        self.log.log_end_offset += 1
        return len(records)

    def follower_high_watermark(self, hw: int) -> bool:
        self.high_watermark = min(hw, self.log.log_end_offset)
        return True


class Leader:
    """Answers each fetch with the next scripted answer, keeping the requests."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.answers: list[dict] = []

    async def request(self, api_key, version, body, timeout):
        self.requests.append(body)
        return self.answers.pop(0)

    def close(self) -> None:
        pass


def answer(session_id: int, partitions=(), error=ErrorCode.NONE) -> dict:
    return {
        "error_code": error,
        "session_id": session_id,
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {"partition_index": p, "error_code": code, "high_watermark": hw,
                     "log_start_offset": 0, "records": records}
                    for p, code, hw, records in partitions
                ],
            }
        ]
        if partitions
        else [],
    }  # fmt: skip


def named(body: dict) -> list[int]:
    return sorted(p["partition"] for t in body["topics"] for p in t["partitions"])


def forgotten(body: dict) -> list[int]:
    return sorted(i for t in body["forgotten_topics_data"] for i in t["partitions"])


def fetcher_of(partitions: dict) -> tuple[ReplicaFetcher, Leader]:
    replicas = SimpleNamespace(get=lambda topic, index: partitions.get((topic, index)))
    settings = FetcherSettings(
        broker_id=0, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20,
        partition_max_bytes=1 << 20, backoff_ms=1000, request_timeout_s=1.0,
    )  # fmt: skip
    now = [0]
    manager = ReplicaFetcherManager(replicas, settings, lambda: now[0])
    manager.clock = now
    fetcher = ReplicaFetcher(manager, 1, 0, ("127.0.0.1", 1))
    fetcher.node.close()
    fetcher.node = Leader()
    for tp in partitions:
        fetcher.add(tp, 3)
    return fetcher, fetcher.node


def test_an_idle_follower_names_nothing_and_one_append_names_one_partition():
    partitions = {("t", i): FakePartition() for i in range(SIZE)}
    fetcher, leader = fetcher_of(partitions)

    async def scenario():
        await fetcher._truncate(list(fetcher.truncating))  # empty logs: nothing to cut
        assert fetcher.truncating == set() and fetcher.fetchable() == SIZE
        # The first fetch is full and opens the session.
        leader.answers.append(answer(77))
        await fetcher._fetch()
        first = leader.requests[-1]
        assert (first["session_id"], first["session_epoch"]) == (0, 0)
        assert len(named(first)) == SIZE and fetcher.session_id == 77
        # Idle: nothing named, nothing forgotten, nothing answered.
        leader.answers.append(answer(77))
        await fetcher._fetch()
        idle = leader.requests[-1]
        assert (idle["session_id"], idle["session_epoch"]) == (77, 1)
        assert named(idle) == [] and forgotten(idle) == []
        # Records for one partition: the next fetch names that one at its new offset.
        leader.answers.append(answer(77, [(500, ErrorCode.NONE, 1, b"x")]))
        await fetcher._fetch()
        leader.answers.append(answer(77))
        await fetcher._fetch()
        after = leader.requests[-1]
        assert named(after) == [500] and after["session_epoch"] == 3
        assert after["topics"][0]["partitions"][0]["fetch_offset"] == 1
        # An error pauses a partition: it is forgotten, then named again once resumed.
        leader.answers.append(answer(77, [(7, ErrorCode.NOT_LEADER_OR_FOLLOWER, 1, b"")]))
        await fetcher._fetch()
        leader.answers.append(answer(77))
        await fetcher._fetch()
        assert forgotten(leader.requests[-1]) == [7] and named(leader.requests[-1]) == []
        fetcher.manager.clock[0] += 1000
        fetcher._resume(fetcher.manager.now_ms())
        leader.answers.append(answer(77))
        await fetcher._fetch()
        assert named(leader.requests[-1]) == [7] and forgotten(leader.requests[-1]) == []
        # Removing a partition forgets it.
        fetcher.remove(("t", 9))
        leader.answers.append(answer(77))
        await fetcher._fetch()
        assert forgotten(leader.requests[-1]) == [9] and named(leader.requests[-1]) == []

    asyncio.run(scenario())


def test_a_session_error_falls_back_to_a_full_fetch():
    partitions = {("t", i): FakePartition() for i in range(5)}
    fetcher, leader = fetcher_of(partitions)

    async def scenario():
        await fetcher._truncate(list(fetcher.truncating))
        leader.answers += [answer(5), answer(0, error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)]
        await fetcher._fetch()
        await fetcher._fetch()
        assert fetcher.session_id == 0
        leader.answers.append(answer(6))
        await fetcher._fetch()
        full = leader.requests[-1]
        assert (full["session_id"], full["session_epoch"], len(named(full))) == (0, 0, 5)
        assert fetcher.session_id == 6
        # A leader without a free slot answers session 0: the fetches stay full.
        fetcher._close_session()
        leader.answers += [answer(0), answer(0)]
        await fetcher._fetch()
        await fetcher._fetch()
        assert [r["session_epoch"] for r in leader.requests[-2:]] == [0, 0]
        assert len(named(leader.requests[-1])) == 5

    asyncio.run(scenario())
