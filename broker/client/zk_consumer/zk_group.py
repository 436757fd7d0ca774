"""A group's znodes read and written through a (thread-based) kazoo client: members,
owners, offsets, and what the group needs of the brokers' layout. Paths and JSON are
broker.zk.layout's; the consumer and the offset checker both use these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from broker.cluster import BrokerRegistration
from broker.zk import layout as z


def read_registrations(client: KazooClient) -> dict[int, BrokerRegistration]:
    """The registered brokers (`/brokers/ids`), each with its creation zxid as `epoch`."""
    try:
        children = client.get_children(z.BROKER_IDS)
    except NoNodeError:
        return {}
    found = {}
    for child in children:
        if not child.isdigit():
            continue
        try:
            data, stat = client.get(z.broker_path(int(child)))
        except NoNodeError:  # gone between the listing and the read
            continue
        found[int(child)] = z.decode_broker(int(child), data, stat.czxid)
    return found


def bootstrap_servers(client: KazooClient) -> list[str]:
    """ "host:port" of every registered broker's PLAINTEXT endpoint (else its first), for
    the Metadata requests that find the leaders."""
    out = []
    for registration in read_registrations(client).values():
        endpoint = next(
            (e for e in registration.endpoints if e.security_protocol == "PLAINTEXT"),
            registration.endpoints[0],
        )
        out.append(f"{endpoint.host}:{endpoint.port}")
    return sorted(out)


def topic_partitions(client: KazooClient, topics: Iterable[str]) -> dict[str, list[int]]:
    """topic -> its partition numbers, from `/brokers/topics/<topic>`; topics that do not
    exist (yet) are left out."""
    out = {}
    for topic in topics:
        try:
            data, _ = client.get(z.topic_path(topic))
        except NoNodeError:
            continue
        out[topic] = sorted(z.decode_assignment(topic, data))
    return out


def members(client: KazooClient, group: str) -> dict[str, z.ConsumerRegistration]:
    """consumer id -> its registration, for the members registered now."""
    try:
        children = client.get_children(z.consumer_ids_path(group))
    except NoNodeError:
        return {}
    found = {}
    for consumer_id in children:
        try:
            data, _ = client.get(z.consumer_id_path(group, consumer_id))
        except NoNodeError:  # left between the listing and the read
            continue
        found[consumer_id] = z.decode_consumer_registration(consumer_id, data)
    return found


def group_topics(client: KazooClient, group: str) -> list[str]:
    """Topics the group has offsets or owners for."""
    topics: set[str] = set()
    for path in (z.consumer_offsets_path(group), z.consumer_owners_path(group)):
        try:
            topics.update(client.get_children(path))
        except NoNodeError:
            pass
    return sorted(topics)


def committed_offset(client: KazooClient, group: str, topic: str, partition: int) -> int | None:
    try:
        data, _ = client.get(z.consumer_offset_path(group, topic, partition))
    except NoNodeError:
        return None
    return z.decode_consumer_offset(data, f"offset of {group} in {topic}-{partition}")


def owner(client: KazooClient, group: str, topic: str, partition: int) -> str | None:
    """The consumer thread owning the partition now, or None."""
    try:
        data, _ = client.get(z.consumer_owner_path(group, topic, partition))
    except NoNodeError:
        return None
    return data.decode(errors="replace")


def commit_offsets(client: KazooClient, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
    """Write each partition's next offset to read (persistent znodes, parents created)."""
    for (topic, partition), offset in sorted(offsets.items()):
        path = z.consumer_offset_path(group, topic, partition)
        data = z.encode_consumer_offset(offset)
        try:
            client.set(path, data)
        except NoNodeError:
            try:
                client.create(path, data, makepath=True)
            except NodeExistsError:  # created meanwhile (a previous owner's last commit)
                client.set(path, data)


def claim(client: KazooClient, group: str, topic: str, partition: int, thread: str) -> bool:
    """Create the partition's ephemeral owner znode for `thread`; False when it belongs to
    someone else. A znode with our name left by an earlier session of ours (a configured
    consumer.id restarted) is someone else's until that session expires."""
    path = z.consumer_owner_path(group, topic, partition)
    try:
        client.create(path, thread.encode(), ephemeral=True, makepath=True)
        return True
    except NodeExistsError:
        try:
            data, stat = client.get(path)
        except NoNodeError:
            return False  # released just now: the next attempt may take it
        return data == thread.encode() and stat.ephemeralOwner == client.client_id[0]


def release(client: KazooClient, group: str, topic: str, partition: int, thread: str) -> None:
    """Delete the owner znode if it is ours."""
    path = z.consumer_owner_path(group, topic, partition)
    try:
        data, stat = client.get(path)
        if data == thread.encode() and stat.ephemeralOwner == client.client_id[0]:
            client.delete(path, version=stat.version)
    except NoNodeError:
        pass
