"""ZooKeeper for an asyncio broker: kazoo underneath, every result and event on the loop.

kazoo runs its own threads; nothing of ours may run there. Calls go through kazoo's
asynchronous API and resolve asyncio futures via `call_soon_threadsafe`; watch callbacks
and session-state changes are handed to the event loop the same way. So broker state is
only ever touched from the event loop thread (docs/contracts/cluster.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)
from kazoo.protocol.states import WatchedEvent, ZnodeStat

log = logging.getLogger(__name__)

__all__ = [
    "BadVersionError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "SessionState",
    "WatchedEvent",
    "ZkClient",
    "ZnodeStat",
]


class SessionState:
    """kazoo's connection states: CONNECTED; SUSPENDED (connection lost, the session may
    still be alive: ephemeral nodes stay until it expires); LOST (the session expired or
    the client stopped: ephemeral nodes and watches are gone, re-register)."""

    CONNECTED = KazooState.CONNECTED
    SUSPENDED = KazooState.SUSPENDED
    LOST = KazooState.LOST


Watch = Callable[[WatchedEvent], None]


class ZkClient:
    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int | None = None,
    ) -> None:
        self.connect = connect
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kazoo = KazooClient(
            hosts=connect,
            timeout=session_timeout_ms / 1000,
            connection_retry={"max_tries": -1, "delay": 0.2, "max_delay": 2},
            command_retry=None,
        )
        self._session_timeout_s = session_timeout_ms / 1000
        self._connection_timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000
        self._state_listeners: list[Callable[[str], None]] = []
        self._kazoo.add_listener(self._on_state)

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        """Connect (creating the connect string's chroot path if missing, as Kafka does);
        raises TimeoutError when no server answers in time."""
        self._loop = asyncio.get_running_loop()
        hosts, slash, chroot = self.connect.partition("/")
        if slash and chroot:
            root = KazooClient(hosts=hosts, timeout=self._session_timeout_s)
            await self._loop.run_in_executor(None, self._ensure_chroot, root, "/" + chroot)
        await self._loop.run_in_executor(None, self._start_blocking, self._kazoo)

    def _start_blocking(self, kazoo: KazooClient) -> None:  # an executor thread
        event = kazoo.start_async()
        if not event.wait(self._connection_timeout_s) or not kazoo.connected:
            kazoo.stop()
            raise TimeoutError(
                f"could not connect to ZooKeeper at {self.connect} within "
                f"{self._connection_timeout_s:.0f}s"
            )

    def _ensure_chroot(self, root: KazooClient, path: str) -> None:  # an executor thread
        try:
            self._start_blocking(root)
            root.ensure_path(path)
        finally:
            root.stop()
            root.close()

    async def close(self) -> None:
        """End the session (its ephemeral nodes go at once) and the client's threads."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._stop)

    def _stop(self) -> None:
        try:
            self._kazoo.stop()
        finally:
            self._kazoo.close()

    @property
    def connected(self) -> bool:
        return self._kazoo.connected

    @property
    def session_id(self) -> int | None:
        """The current session's id (a new one after an expiry)."""
        session = self._kazoo.client_id
        return session[0] if session else None

    def add_state_listener(self, listener: Callable[[str], None]) -> None:
        """`listener(state)` on the event loop for every SessionState change."""
        self._state_listeners.append(listener)

    def _on_state(self, state: str) -> None:  # kazoo's thread
        if self._loop is None or self._loop.is_closed():
            return
        for listener in self._state_listeners:
            self._loop.call_soon_threadsafe(listener, state)

    # -- reads ----------------------------------------------------------------------------
    async def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, ZnodeStat] | None:
        """(data, stat), or None when the node does not exist (a watch set then fires on
        its creation only if set through `exists`)."""
        try:
            return await self._call(self._kazoo.get_async(path, self._on_loop(watch)))
        except NoNodeError:
            return None

    async def get_children(self, path: str, watch: Watch | None = None) -> list[str] | None:
        try:
            return await self._call(self._kazoo.get_children_async(path, self._on_loop(watch)))
        except NoNodeError:
            return None

    async def exists(self, path: str, watch: Watch | None = None) -> ZnodeStat | None:
        return await self._call(self._kazoo.exists_async(path, self._on_loop(watch)))

    # -- writes ---------------------------------------------------------------------------
    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        """The created path (with its sequence number). Raises NodeExistsError."""
        return await self._call(
            self._kazoo.create_async(
                path, data, ephemeral=ephemeral, sequence=sequence, makepath=makepath
            )
        )

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        """Raises BadVersionError when `version` is not the node's (a conditional update
        lost to another writer), NoNodeError when it is gone."""
        return await self._call(self._kazoo.set_async(path, data, version))

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        """True when deleted, False when it was already gone."""
        try:
            if recursive:
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(None, self._kazoo.delete, path, version, True)
            else:
                await self._call(self._kazoo.delete_async(path, version))
            return True
        except NoNodeError:
            return False

    async def ensure_paths(self, paths: Iterable[str]) -> None:
        for path in paths:
            await self._call(self._kazoo.ensure_path_async(path))

    async def commit(self, operations: Iterable[tuple[str, Any]]) -> list[Any]:
        """Several writes applied atomically (ZooKeeper's multi), e.g. a controller's
        ("check", path, version) fencing its ("set", path, data, version) writes.
        Raises the failing operation's error, with its index in `failed_operation`;
        nothing is applied then. Returns each operation's result (a set's ZnodeStat, a
        create's path)."""
        transaction = self._kazoo.transaction()
        for op, *args in operations:
            {
                "check": transaction.check,
                "create": transaction.create,
                "set": transaction.set_data,
                "delete": transaction.delete,
            }[op](*args)
        results = await self._call(transaction.commit_async())
        # A failed multi answers every operation: the one that failed with its error, the
        # others with RolledBackError. Raise the cause.
        for index, result in enumerate(results):
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                result.failed_operation = index  # which one: e.g. a fencing check
                raise result
        for result in results:
            if isinstance(result, Exception):
                raise result
        return results

    # -- plumbing -------------------------------------------------------------------------
    def _call(self, async_result) -> asyncio.Future:
        loop = self._loop or asyncio.get_running_loop()
        future = loop.create_future()

        def done(result) -> None:  # kazoo's thread
            try:
                value, error = result.get_nowait(), None
            except Exception as exc:  # delivered to the awaiting coroutine
                value, error = None, exc
            if not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, future, value, error)

        async_result.rawlink(done)
        return future

    def _on_loop(self, watch: Watch | None) -> Watch | None:
        if watch is None:
            return None
        loop = self._loop or asyncio.get_running_loop()

        def deliver(event: WatchedEvent) -> None:  # kazoo's thread
            if not loop.is_closed():
                loop.call_soon_threadsafe(watch, event)

        return deliver


def _resolve(future: asyncio.Future, value: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
