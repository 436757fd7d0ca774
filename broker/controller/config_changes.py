"""Every broker follows config changes without a restart, as Kafka 2.x's config change
listener does (docs/contracts/cluster.md).

Whoever changes a config (AlterConfigs on any broker, or Kafka's own tools) writes the
entity's znode and then a persistent sequential notification
`/config/changes/config_change_<seq>` = `{"version":2,"entity_path":"topics/<t>"}` (or
`brokers/<id>`, `brokers/<default>`, `users/<user>`). This listener watches the children of
/config/changes; for each notification after the last one it processed it re-reads the
entity's znode and applies it (broker/server/dynamic_config.py: the topic's overrides, or
this broker's dynamic broker configs, re-configuring the logs; a user's SCRAM credentials
go to `on_user_config`, the broker's authenticator). Notifications are only a
nudge: at start, and after a new ZooKeeper session, every current config is read, so a
broker never needs the notifications from before. Notifications older than 15 minutes
are deleted (by any broker, as Kafka).

Watch callbacks arrive on the event loop (broker/controller/zk.py); processing runs one
pass at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine

from broker.controller import zk_layout as z
from broker.controller.zk import SessionState, ZkClient
from broker.security.scram import ScramError
from broker.security.user_scram import desanitize_user
from broker.server.dynamic_config import DynamicConfigs, ResourceType
from broker.util.clock import MINUTE_MS

log = logging.getLogger(__name__)

# Kafka's changeExpirationMs: a notification this old has been seen by every live broker.
NOTIFICATION_EXPIRY_MS = 15 * MINUTE_MS


class ConfigChangeListener:
    def __init__(
        self,
        zk: ZkClient,
        configs: DynamicConfigs,
        spawn: Callable[[Coroutine], object],
        now_ms: Callable[[], int],
        on_user_config: Callable[[str, dict[str, str]], None] | None = None,
    ) -> None:
        self.zk = zk
        self.configs = configs
        self.spawn = spawn
        self.now_ms = now_ms
        # (user, its whole config map: SCRAM credentials as Kafka stores them) on every
        # change of /config/users/<user>, and for every user at start.
        self.on_user_config = on_user_config
        self.last_sequence = -1  # the newest notification processed (or read past)
        self._lock = asyncio.Lock()
        self._watching = False
        self._session_lost = False

    async def start(self) -> None:
        """Watch for notifications, then read every current config (so nothing that
        changes meanwhile is missed, and nothing from before is needed)."""
        self.zk.add_state_listener(self._on_session_state)
        await self._catch_up()

    async def _catch_up(self) -> None:
        async with self._lock:
            children = await self._watch_children()
            self.last_sequence = max(_sequences(children), default=self.last_sequence)
            for topic in await self.zk.get_children(z.CONFIG_TOPICS) or []:
                await self._reload(f"topics/{topic}")
            for entity in (z.DEFAULT_BROKER_ENTITY, str(self.configs.broker_id)):
                await self._reload(f"brokers/{entity}")
            if self.on_user_config is not None:
                for user in await self.zk.get_children(z.CONFIG_USERS) or []:
                    await self._reload(f"users/{user}")

    async def _watch_children(self) -> list[str]:
        watch = None if self._watching else self._changed
        self._watching = True
        try:
            return await self.zk.get_children(z.CONFIG_CHANGES, watch=watch) or []
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
                sequences = _sequences(children)
                for sequence, name in sorted(sequences.items()):
                    if sequence <= self.last_sequence:
                        continue
                    found = await self.zk.get(f"{z.CONFIG_CHANGES}/{name}")
                    if found is not None:
                        try:
                            await self._reload(z.decode_config_change(found[0]))
                        except z.ZkDataError as exc:
                            log.error("ignoring config change %s: %s", name, exc)
                    self.last_sequence = sequence
                await self._purge(sequences)
        except Exception:  # ZooKeeper unreachable: the next session's catch-up reads all
            log.warning("config change notifications not processed", exc_info=True)

    async def _reload(self, entity_path: str) -> None:
        """Read one entity's config znode and apply it (a missing znode: no overrides)."""
        kind, _, name = entity_path.partition("/")
        if kind == "users":
            await self._reload_user(entity_path, name)
            return
        if kind == "topics":
            resource = ResourceType.TOPIC
        elif kind == "brokers" and name in (z.DEFAULT_BROKER_ENTITY, str(self.configs.broker_id)):
            resource = ResourceType.BROKER
        else:
            return  # another broker's configs, or entities we have no use for (clients, users)
        found = await self.zk.get(z.config_path(entity_path))
        try:
            overrides = z.decode_config(entity_path, found[0]) if found is not None else {}
            if overrides != self.configs.overrides(resource, name):
                self.configs.apply(resource, name, overrides)
        except ValueError as exc:  # a hand-written bad value: what is in force stays
            log.error("ignoring the config of %s: %s", entity_path, exc)

    async def _reload_user(self, entity_path: str, name: str) -> None:
        if self.on_user_config is None:
            return
        found = await self.zk.get(z.config_path(entity_path))
        try:
            config = z.decode_config(entity_path, found[0]) if found is not None else {}
            self.on_user_config(desanitize_user(name), config)
        except (
            ValueError,
            ScramError,
        ) as exc:  # a hand-written bad credential: what is in force stays
            log.error("ignoring the config of %s: %s", entity_path, exc)

    async def _purge(self, sequences: dict[int, str]) -> None:
        now = self.now_ms()
        for _, name in sorted(sequences.items()):
            path = f"{z.CONFIG_CHANGES}/{name}"
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
        try:
            await self._catch_up()
        except Exception:
            log.warning("could not read the configs after a new session", exc_info=True)


def _sequences(children: list[str]) -> dict[int, str]:
    found = {}
    for name in children:
        sequence = z.config_change_sequence(name)
        if sequence is not None:
            found[sequence] = name
    return found
