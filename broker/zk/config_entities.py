"""Config entities in ZooKeeper, as Kafka 2.x's AdminZkClient writes them: an entity's map
at `/config/<type>/<name>` (`topics/<t>`, `brokers/<id>` or `brokers/<default>`,
`users/<u>`), then a change notification `/config/changes/config_change_<seq>` that
every broker follows (broker/server/modes/config_changes.py). The broker's topic
administration in a cluster (broker/server/modes/zk_topic_admin.py) and the SCRAM
credentials tool's --zookeeper (broker/tools/user_credentials.py) write through here.
"""

from __future__ import annotations

import logging

from broker.security.user_scram import desanitize_user, sanitize_user
from broker.zk import layout as z
from broker.zk.client import NodeExistsError, NoNodeError, ZkClient

log = logging.getLogger(__name__)


async def write_entity_config(zk: ZkClient, entity_path: str, config: dict[str, str]) -> None:
    """Store a config entity's map (`topics/<t>`, `brokers/<id>`, `users/<u>`), then the
    change notification every broker follows."""
    path = z.config_path(entity_path)
    data = z.encode_topic_config(config)
    try:
        await zk.set(path, data)
    except NoNodeError:
        try:
            await zk.create(path, data, makepath=True)
        except NodeExistsError:  # another broker created it meanwhile: ours is newer
            await zk.set(path, data)
    await zk.create(
        f"{z.CONFIG_CHANGES}/{z.CONFIG_CHANGE_PREFIX}",
        z.encode_config_change(entity_path),
        sequence=True,
        makepath=True,
    )
    # Never the values: a user's entity holds credentials.
    log.info("config of %s written: keys %s", entity_path, sorted(config))


def user_entity(user: str) -> str:
    return f"users/{sanitize_user(user)}"


async def read_user_configs(zk: ZkClient, users: list[str] | None) -> dict[str, dict[str, str]]:
    """The stored config maps of `users` (None: every user with an entity); users with
    none are left out."""
    if users is None:
        users = [desanitize_user(c) for c in await zk.get_children(z.CONFIG_USERS) or []]
    found = {}
    for user in users:
        entity = user_entity(user)
        data = await zk.get(z.config_path(entity))
        if data is not None:
            found[user] = z.decode_config(entity, data[0])
    return found
