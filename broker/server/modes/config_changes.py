"""Every broker follows config changes without a restart, as Kafka 2.x's config change
listener does (docs/contracts/cluster.md).

Whoever changes a config (AlterConfigs on any broker, or Kafka's own tools) writes the
entity's znode and then a persistent sequential notification
`/config/changes/config_change_<seq>` = `{"version":2,"entity_path":"topics/<t>"}` (or
`brokers/<id>`, `brokers/<default>`, `users/<user>`). For each notification this listener
re-reads the entity's znode and applies it (broker/server/dynamic_config.py: the topic's
overrides, or this broker's dynamic broker configs, re-configuring the logs; a user's SCRAM
credentials go to `on_user_config`, the broker's authenticator); at start and after a new
session it reads every current config (the mechanics: notifications.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine

from broker.security.scram import ScramError
from broker.security.user_scram import desanitize_user
from broker.server.dynamic_config import DynamicConfigs, ResourceType
from broker.zk import layout as z
from broker.zk.client import ZkClient
from broker.zk.notifications import NOTIFICATION_EXPIRY_MS, ChangeNotificationListener

log = logging.getLogger(__name__)

__all__ = ["NOTIFICATION_EXPIRY_MS", "ConfigChangeListener"]


class ConfigChangeListener(ChangeNotificationListener):
    def __init__(
        self,
        zk: ZkClient,
        configs: DynamicConfigs,
        spawn: Callable[[Coroutine], object],
        now_ms: Callable[[], int],
        on_user_config: Callable[[str, dict[str, str]], None] | None = None,
    ) -> None:
        super().__init__(zk, z.CONFIG_CHANGES, z.CONFIG_CHANGE_PREFIX, spawn, now_ms)
        self.configs = configs
        # (user, its whole config map: SCRAM credentials as Kafka stores them) on every
        # change of /config/users/<user>, and for every user at start.
        self.on_user_config = on_user_config

    async def read_all(self) -> None:
        for topic in await self.zk.get_children(z.CONFIG_TOPICS) or []:
            await self._reload(f"topics/{topic}")
        for entity in (z.DEFAULT_BROKER_ENTITY, str(self.configs.broker_id)):
            await self._reload(f"brokers/{entity}")
        if self.on_user_config is not None:
            for user in await self.zk.get_children(z.CONFIG_USERS) or []:
                await self._reload(f"users/{user}")

    async def apply(self, name: str, data: bytes) -> None:
        await self._reload(z.decode_config_change(data))

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
