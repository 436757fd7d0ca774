"""The change notification listener (broker/zk/notifications.py) when a pass is cut short
by a lost connection while the session lives (F2 in docs/faults.md): the watch that pass
was setting is not set, so once reconnected everything is read again and watched again.
Against a scripted ZooKeeper client: the decision, without sockets."""

from __future__ import annotations

import asyncio

from broker.zk.client import ConnectionLoss
from broker.zk.notifications import ChangeNotificationListener
from tests.helpers.aio import run, settle


class ScriptedZk:
    """The calls the listener makes; `cut` names calls that fail once with ConnectionLoss."""

    def __init__(self) -> None:
        self.children: list[str] = []
        self.watches: list = []
        self.cut: set[str] = set()
        self.connected = True
        self._on_connected: list = []

    def add_state_listener(self, listener) -> None:
        pass

    def when_connected(self, callback) -> None:
        if self.connected:
            asyncio.get_running_loop().call_soon(callback)
        else:
            self._on_connected.append(callback)

    def reconnect(self) -> None:
        self.connected = True
        for callback in self._on_connected:
            asyncio.get_running_loop().call_soon(callback)
        self._on_connected.clear()

    def notify(self, name: str) -> None:
        """A notification is written: the watch fires."""
        self.children.append(name)
        for watch in self.watches:
            asyncio.get_running_loop().call_soon(watch, None)
        self.watches.clear()

    async def get_children(self, path: str, watch=None) -> list[str]:
        if "get_children" in self.cut:
            self.cut.discard("get_children")
            self.connected = False
            raise ConnectionLoss()
        if watch is not None:
            self.watches.append(watch)
        return list(self.children)

    async def get(self, path: str):
        return b"{}", None

    async def exists(self, path: str):
        return None


class Recorder(ChangeNotificationListener):
    def __init__(self, zk, spawn) -> None:
        super().__init__(zk, "/changes", "n_", spawn, lambda: 0)
        self.read_alls = 0
        self.applied: list[str] = []

    async def read_all(self) -> None:
        self.read_alls += 1

    async def apply(self, name: str, data: bytes) -> None:
        self.applied.append(name)


def test_a_pass_cut_short_reads_all_and_watches_again_once_reconnected():
    async def scenario():
        zk = ScriptedZk()
        tasks: set[asyncio.Task] = set()

        def spawn(coro):
            task = asyncio.get_running_loop().create_task(coro)
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        async def quiet():
            await settle(lambda: tasks)

        listener = Recorder(zk, spawn)
        await listener.start()
        assert listener.read_alls == 1 and len(zk.watches) == 1

        zk.cut = {"get_children"}  # the pass for n_1 loses the connection
        zk.notify("n_0000000001")
        await quiet()
        assert listener.applied == [] and zk.watches == []

        zk.reconnect()
        await quiet()
        assert listener.read_alls == 2 and len(zk.watches) == 1  # read and watched again

        zk.notify("n_0000000002")
        await quiet()
        assert listener.applied == ["n_0000000002"]

    run(scenario())
