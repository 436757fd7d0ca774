"""kazoo behind asyncio, against a real ZooKeeper server: results and watch events arrive
on the event loop's thread, conditional writes fail as ZooKeeper says, sessions end."""

from __future__ import annotations

import asyncio
import threading

import pytest

from broker.zk.client import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    SessionState,
    UnimplementedError,
    ZkClient,
)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


async def _client(connect: str) -> ZkClient:
    client = ZkClient(connect, session_timeout_ms=6000)
    await client.start()
    return client


def test_reads_writes_and_conditional_updates(zk_connect):
    async def scenario():
        zk = await _client(zk_connect)
        try:
            assert await zk.create("/a/b", b"one", makepath=True) == "/a/b"
            with pytest.raises(NodeExistsError):
                await zk.create("/a/b", b"again")
            data, stat = await zk.get("/a/b")
            assert (data, stat.version) == (b"one", 0)
            await zk.set("/a/b", b"two", version=0)
            with pytest.raises(BadVersionError):  # someone else's version
                await zk.set("/a/b", b"three", version=0)
            assert (await zk.get("/a/b"))[0] == b"two"
            assert await zk.get("/missing") is None
            assert await zk.get_children("/missing") is None
            seq = await zk.create("/a/seq_", sequence=True)
            assert seq.startswith("/a/seq_") and len(seq) == len("/a/seq_") + 10
            assert sorted(await zk.get_children("/a")) == ["b", seq.rsplit("/", 1)[1]]
            assert await zk.delete("/a", recursive=True) and not await zk.delete("/a")
            with pytest.raises(NoNodeError):
                await zk.set("/a/b", b"x")
        finally:
            await zk.close()

    run(scenario())


def test_watches_and_results_arrive_on_the_event_loop_thread(zk_connect):
    async def scenario():
        zk = await _client(zk_connect)
        other = await _client(zk_connect)
        loop_thread = threading.get_ident()
        events: asyncio.Queue = asyncio.Queue()

        def watch(event):
            events.put_nowait((event.type, event.path, threading.get_ident()))

        try:
            await zk.ensure_paths(["/brokers/ids"])
            assert await zk.get_children("/brokers/ids", watch=watch) == []
            await other.create("/brokers/ids/1", b"{}", ephemeral=True)
            kind, path, thread = await events.get()
            assert (kind, path, thread) == ("CHILD", "/brokers/ids", loop_thread)
            # An ephemeral node goes with its session.
            assert await zk.exists("/brokers/ids/1", watch=watch) is not None
            await other.close()
            kind, path, thread = await events.get()
            assert (kind, path, thread) == ("DELETED", "/brokers/ids/1", loop_thread)
        finally:
            await zk.close()

    run(scenario())


def test_commit_is_all_or_nothing(zk_connect):
    async def scenario():
        zk = await _client(zk_connect)
        try:
            await zk.create("/epoch", b"1")
            await zk.create("/state", b"old")
            await zk.commit([("check", "/epoch", 0), ("set", "/state", b"new", 0)])
            assert (await zk.get("/state"))[0] == b"new"
            await zk.set("/epoch", b"2")  # a newer controller took over
            with pytest.raises(BadVersionError):
                await zk.commit([("check", "/epoch", 0), ("set", "/state", b"fenced", 1)])
            assert (await zk.get("/state"))[0] == b"new"
            # The epoch holds, the state was changed by someone else: that is the error.
            with pytest.raises(BadVersionError):
                await zk.commit([("check", "/epoch", 1), ("set", "/state", b"x", 0)])
            with pytest.raises(NodeExistsError):
                await zk.commit([("check", "/epoch", 1), ("create", "/state", b"x")])
        finally:
            await zk.close()

    run(scenario())


def _count_kazoo_requests(zk: ZkClient) -> list:
    """Every request kazoo queues for the server (its `_call`), pings aside."""
    sent: list = []
    kazoo_call = zk._kazoo._call

    def counting(request, async_object):
        sent.append(type(request).__name__)
        return kazoo_call(request, async_object)

    zk._kazoo._call = counting
    return sent


def test_commit_each_writes_many_groups_in_a_few_multis(zk_connect):
    async def scenario():
        zk = await _client(zk_connect)
        try:
            await zk.create("/fence", b"1")
            await zk.ensure_paths(["/many"])
            paths = [f"/many/{i}" for i in range(1000)]
            sent = _count_kazoo_requests(zk)
            created = await zk.commit_each([[("create", p, b"x" * 100)] for p in paths])
            assert created == [[p] for p in paths]
            assert sent == ["Transaction"]  # 1,000 creates: one request
            # Conditional sets under a fence; a third lost to another writer meanwhile
            # (as when leaders shrink their ISRs while the controller writes).
            theirs = list(range(0, 1000, 3))
            await zk.commit_each([[("set", paths[i], b"theirs", 0)] for i in theirs])
            sent.clear()
            groups = [[("set", p, b"ours", 0)] for p in paths]
            results = await zk.commit_each(groups, [("check", "/fence", 0)])
            lost = [i for i, r in enumerate(results) if isinstance(r, BadVersionError)]
            assert lost == theirs
            # Two multis (with the fence, 1,001 operations); each fails; the rest of the
            # first is read in one multiRead and its writes that can succeed go again (the
            # second held one lost group alone): not a request, or a bisection, per loss.
            assert sorted(sent) == ["Transaction"] * 3 + ["_MultiRead"], sent
            assert all(r[0].version == 1 for i, r in enumerate(results) if i not in lost)
            assert (await zk.get(paths[1]))[0] == b"ours"
            assert (await zk.get(paths[501]))[0] == b"theirs"
            assert zk.counts.requests >= len(sent)
            # A chunk too large for one request is split; a failed fence raises.
            big = [[("set", p, b"y" * 2000, -1)] for p in paths]
            sent.clear()
            await zk.commit_each(big)
            assert 2 <= len(sent) <= 8
            await zk.set("/fence", b"2")
            with pytest.raises(BadVersionError) as failed:
                await zk.commit_each(groups, [("check", "/fence", 0)])
            assert failed.value.failed_operation == 0
            # Reads of many znodes: ZooKeeper's multiRead, a request per 1,000; a missing
            # one is None. A server without multiRead gets the reads one by one.
            sent.clear()
            some = [*paths[:3], "/many/missing"]
            singly = [await zk.get(p) for p in some]
            assert singly[3] is None
            sent.clear()
            assert await zk.get_many(some) == singly
            assert len(await zk.get_many(paths + paths[:10])) == 1010
            assert sent == ["_MultiRead"] * 3, sent
            zk._multi_read_known[0] = None

            async def unimplemented(paths):
                raise UnimplementedError()

            zk._read_together = unimplemented
            sent.clear()
            assert await zk.get_many(some) == singly
            assert sent == ["GetData"] * 4 and zk._multi_read is False
        finally:
            await zk.close()

    run(scenario())


def test_session_states_and_an_unreachable_server():
    async def unreachable():
        zk = ZkClient("127.0.0.1:1", session_timeout_ms=2000)
        with pytest.raises(TimeoutError, match="could not connect"):
            await zk.start()

    run(unreachable())


def test_close_reports_the_session_lost(zk_connect):
    async def scenario():
        zk = await _client(zk_connect)
        states: list[str] = []
        zk.add_state_listener(states.append)
        assert zk.connected and zk.session_id
        await zk.close()
        await asyncio.sleep(0.1)
        assert states[-1] == SessionState.LOST

    run(scenario())
