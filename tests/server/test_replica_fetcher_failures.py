"""A follower's partition whose fetched data cannot be taken fails alone (F3 in
docs/faults.md): it leaves its fetcher, is counted in `ReplicaFetcherManager.failed`, and
comes back with its next leadership, while the other partitions of the same leader go on
replicating. No sockets: a scripted leader, first with fake partitions (what each fetch
names), then with real logs and the fetcher's own loop."""

from __future__ import annotations

import asyncio

from broker.log.config import LogConfig
from broker.log.log import Log
from broker.protocol.apis import FETCH_API, OFFSET_FOR_LEADER_EPOCH_API
from broker.protocol.errors import ErrorCode
from broker.records.batch import build_batch
from broker.server.partition import Leadership, Partition
from broker.server.replica_fetcher import FetcherSettings, ReplicaFetcher, ReplicaFetcherManager
from tests.helpers.aio import run, until
from tests.server.test_replica_fetcher_session import FakePartition, answer, fetcher_of, named


class BelowLogEnd(FakePartition):
    def append_as_follower(self, records, now_ms) -> int:
        raise ValueError("batch at offset 0 is below 66")


def test_a_partition_whose_append_fails_leaves_the_fetch_the_others_go_on():
    partitions = {("t", 0): BelowLogEnd(), ("t", 1): FakePartition(), ("t", 2): FakePartition()}
    fetcher, leader = fetcher_of(partitions)
    manager = fetcher.manager

    async def scenario():
        await fetcher._truncate(list(fetcher.truncating))
        leader.answers.append(answer(0, [(p, ErrorCode.NONE, 1, b"x") for p in range(3)]))
        await fetcher._fetch()  # raised out of the whole fetch before
        assert manager.failed == {("t", 0): "ValueError: batch at offset 0 is below 66"}
        assert ("t", 0) not in fetcher.partitions
        assert [partitions["t", p].log.log_end_offset for p in (1, 2)] == [1, 1]
        leader.answers.append(answer(0))
        await fetcher._fetch()
        again = leader.requests[-1]
        assert named(again) == [1, 2]
        assert {p["fetch_offset"] for t in again["topics"] for p in t["partitions"]} == {1}
        # A new leadership (LeaderAndIsr at a new epoch) tries it again, from truncation.
        manager.fetchers[(1, 0)] = fetcher
        manager._where.update({tp: (1, 0) for tp in fetcher.partitions})
        manager.add(("t", 0), 1, fetcher.address)
        assert manager.failed == {} and ("t", 0) in fetcher.truncating

    run(scenario())


EPOCH = 3


def _batches(start: int, end: int, per_batch: int) -> list[bytes]:
    """The leader's log from `start` to `end` in batches of `per_batch` records."""
    return [
        build_batch(
            [(None, b"v%d" % i, 1_000, []) for i in range(base, min(base + per_batch, end))],
            base_offset=base,
            partition_leader_epoch=EPOCH,
        )
        for base in range(start, end, per_batch)
    ]


class ScriptedLeader:
    """Answers OffsetForLeaderEpoch and Fetch from per-partition batches, as a leader
    does: a fetch gets the batch holding its fetch offset (one at a time, no session)."""

    def __init__(self, logs: dict[tuple[str, int], list[bytes]]) -> None:
        self.logs = logs
        self.fetches = 0

    def _end(self, tp) -> int:
        return _end_of(self.logs[tp])

    async def request(self, api_key, version, body, timeout):
        await asyncio.sleep(0)  # a real round trip yields to the loop
        if api_key == OFFSET_FOR_LEADER_EPOCH_API.key:
            return {
                "topics": [
                    {
                        "topic": t["topic"],
                        "partitions": [
                            {"partition": p["partition"], "error_code": 0,
                             "leader_epoch": EPOCH, "end_offset": self._end((t["topic"], p["partition"]))}
                            for p in t["partitions"]
                        ],
                    }
                    for t in body["topics"]
                ]
            }  # fmt: skip
        assert api_key == FETCH_API.key
        self.fetches += 1
        partitions = []
        for t in body["topics"]:
            for p in t["partitions"]:
                tp = (t["topic"], p["partition"])
                holding = [b for b in self.logs[tp] if _end_of([b]) > p["fetch_offset"]][:1]
                partitions.append(
                    {"partition_index": tp[1], "error_code": 0, "high_watermark": self._end(tp),
                     "log_start_offset": 0, "records": b"".join(holding)}
                )  # fmt: skip
        return {"error_code": 0, "session_id": 0, "responses": [{"topic": "t", "partitions": partitions}]}  # fmt: skip

    def close(self) -> None:
        pass


def _end_of(batches: list[bytes]) -> int:
    last = batches[-1]
    base = int.from_bytes(last[0:8], "big")
    last_delta = int.from_bytes(last[23:27], "big")
    return base + last_delta + 1


def test_the_other_partitions_of_that_leader_keep_replicating(tmp_path):
    """The w3 case: the leader's log of t-0 was rebuilt from 0 under the follower at the
    same epoch (one batch 0..99 where the follower holds 0..65): t-0 fails, and t-1 and t-2
    (answered after it in every fetch) are copied to the leader's end."""

    async def scenario():
        logs = {p: Log.open(tmp_path / f"t-{p}", "t", p, LogConfig()) for p in range(3)}
        replicas = {}
        for p, log in logs.items():
            partition = Partition(log, broker_id=0)
            partition.make_follower(Leadership(1, EPOCH, (1, 0), (1, 0)))
            replicas["t", p] = partition
        replicas["t", 0].append_as_follower(_batches(0, 66, 66)[0], 0)
        leader = ScriptedLeader(
            {("t", 0): _batches(0, 100, 100), ("t", 1): _batches(0, 30, 10),
             ("t", 2): _batches(0, 30, 10)}
        )  # fmt: skip
        settings = FetcherSettings(
            broker_id=0, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
            partition_max_bytes=1 << 20, backoff_ms=10, request_timeout_s=1.0,
        )  # fmt: skip
        manager = ReplicaFetcherManager(
            type("Replicas", (), {"get": staticmethod(lambda t, p: replicas.get((t, p)))}),
            settings,
            lambda: 0,
        )
        fetcher = ReplicaFetcher(manager, 1, 0, ("127.0.0.1", 1))
        fetcher.node.close()
        fetcher.node = leader
        manager.fetchers[(1, 0)] = fetcher
        for tp in sorted(replicas):
            manager._where[tp] = (1, 0)
            fetcher.add(tp, EPOCH)
        fetcher.start()
        try:
            await until(
                lambda: all(logs[p].log_end_offset == 30 for p in (1, 2)), "t-1, t-2 copied"
            )
            assert list(manager.failed) == [("t", 0)]
            assert "below 66" in manager.failed["t", 0]
            assert logs[0].log_end_offset == 66  # kept: nothing truncated at the same epoch
            assert replicas["t", 1].high_watermark == 30
        finally:
            await manager.shutdown()
            for log in logs.values():
                log.close()

    run(scenario())
