"""Kafka 2.x's change notifications in ZooKeeper: every broker follows a kind of stored
state (configs, ACLs) without a restart.

Whoever changes the state writes it, then a persistent sequential node
`<path>/<prefix><seq>` naming what changed. A listener watches the children of `<path>`;
for each notification after the last one it processed it re-reads what the notification
names (`apply`). Notifications are only a nudge: at start, and after a new ZooKeeper
session, everything current is read (`read_all`), so a broker never needs the
notifications from before; so too after a pass cut short by a lost connection (the
session lived, but the watch that pass was setting is not set: F2 in docs/faults.md). Notifications older than 15 minutes are deleted (by any broker,
as Kafka's changeExpirationMs).

Watch callbacks arrive on the event loop (broker/zk/client.py); processing runs one
pass at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine

from broker.util.clock import MINUTE_MS
from broker.zk.client import ConnectionLoss, SessionState, ZkClient

log = logging.getLogger(__name__)

NOTIFICATION_EXPIRY_MS = 15 * MINUTE_MS


class ChangeNotificationListener:
    """Subclasses say what a notification means (`apply`) and how to read everything
    (`read_all`)."""

    def __init__(
        self,
        zk: ZkClient,
        path: str,
        prefix: str,
        spawn: Callable[[Coroutine], object],
        now_ms: Callable[[], int],
    ) -> None:
        self.zk = zk
        self.path = path
        self.prefix = prefix
        self.spawn = spawn
        self.now_ms = now_ms
        self.last_sequence = -1  # the newest notification processed (or read past)
        self._lock = asyncio.Lock()
        self._watching = False
        self._session_lost = False
        self._catch_up_due = False  # a pass was cut short: read everything once connected

    async def read_all(self) -> None:
        raise NotImplementedError

    async def apply(self, name: str, data: bytes) -> None:
        """Act on one notification (`name` for messages); raise ValueError to skip it."""
        raise NotImplementedError

    async def start(self) -> None:
        """Watch for notifications, then read everything current (so nothing that
        changes meanwhile is missed, and nothing from before is needed)."""
        self.zk.add_state_listener(self._on_session_state)
        await self._catch_up()

    async def _catch_up(self) -> None:
        async with self._lock:
            children = await self._watch_children()
            self.last_sequence = max(self._sequences(children), default=self.last_sequence)
            await self.read_all()

    async def _watch_children(self) -> list[str]:
        watch = None if self._watching else self._changed
        self._watching = True
        try:
            return await self.zk.get_children(self.path, watch=watch) or []
        except Exception:
            self._watching = False
            raise

    def _changed(self, event) -> None:
        self._watching = False
        self.spawn(self._process())

    async def _process(self) -> None:
        try:
            async with self._lock:
                children = await self._watch_children()
                sequences = self._sequences(children)
                for sequence, name in sorted(sequences.items()):
                    if sequence <= self.last_sequence:
                        continue
                    found = await self.zk.get(f"{self.path}/{name}")
                    if found is not None:
                        try:
                            await self.apply(name, found[0])
                        except ValueError as exc:
                            log.error("ignoring notification %s/%s: %s", self.path, name, exc)
                    self.last_sequence = sequence
                await self._purge(sequences)
        except ConnectionLoss:
            log.warning("notifications under %s cut short: reading all once reconnected", self.path)
            self._catch_up_when_connected()
        except Exception:  # ZooKeeper unreachable: the next session's catch-up reads all
            log.warning("notifications under %s not processed", self.path, exc_info=True)

    def _catch_up_when_connected(self) -> None:
        if not self._catch_up_due:
            self._catch_up_due = True
            self.zk.when_connected(lambda: self.spawn(self._catch_up_logged()))

    async def _purge(self, sequences: dict[int, str]) -> None:
        now = self.now_ms()
        for _, name in sorted(sequences.items()):
            path = f"{self.path}/{name}"
            stat = await self.zk.exists(path)
            if stat is not None and now - stat.ctime > NOTIFICATION_EXPIRY_MS:
                await self.zk.delete(path)

    def _on_session_state(self, state: str) -> None:
        if state == SessionState.LOST:
            self._session_lost = True
            self._watching = False  # the session's watches went with it
        elif state == SessionState.CONNECTED and self._session_lost:
            self._session_lost = False
            self.spawn(self._catch_up_logged())

    async def _catch_up_logged(self) -> None:
        self._catch_up_due = False
        try:
            await self._catch_up()
        except ConnectionLoss:
            self._catch_up_when_connected()
        except Exception:
            log.warning("could not read %s state after a new session", self.path, exc_info=True)

    def _sequences(self, children: list[str]) -> dict[int, str]:
        found = {}
        for name in children:
            digits = name[len(self.prefix) :]
            if name.startswith(self.prefix) and digits.isdigit():
                found[int(digits)] = name
        return found
