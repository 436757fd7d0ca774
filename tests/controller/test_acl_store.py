"""The ZooKeeper ACL store against a real ZooKeeper, in process: two brokers' stores (each
with its own authorizer cache) see each other's changes through Kafka 2.x's change
notifications; the znodes hold Kafka's layout and JSON; writers racing on one resource
both keep their ACLs; a starting broker reads what is there; a broken znode is skipped."""

from __future__ import annotations

import asyncio
import json

from broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from broker.security.acl_store import ZkAclStore
from broker.security.authorizer import Authorizer
from broker.util.clock import now_ms
from broker.zk import layout as z
from broker.zk.client import ZkClient
from tests.helpers.aio import run, until

ALICE = "User:alice"
T = ResourcePattern(ResourceType.TOPIC, "t")
SALES = ResourcePattern(ResourceType.TOPIC, "sales-", PatternType.PREFIXED)
READ = AccessControlEntry(ALICE, "*", Operation.READ, Permission.ALLOW)
WRITE = AccessControlEntry(ALICE, "*", Operation.WRITE, Permission.ALLOW)


class Brokers:
    """`n` brokers' ACL stores, each on a ZooKeeper session of its own."""

    def __init__(self, zk_connect: str) -> None:
        self.zk_connect = zk_connect
        self.clients: list[ZkClient] = []
        self.tasks: set[asyncio.Task] = set()

    def spawn(self, coro):
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def store(self) -> ZkAclStore:
        zk = ZkClient(self.zk_connect, session_timeout_ms=6000)
        await zk.start()
        self.clients.append(zk)
        store = ZkAclStore(Authorizer(), zk, self.spawn, now_ms)
        await store.start()
        return store

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        for zk in self.clients:
            await zk.close()


def can(store: ZkAclStore, op: Operation, name: str) -> bool:
    return store.authorizer.authorize(ALICE, "10.0.0.1", op, ResourceType.TOPIC, name)


def test_two_brokers_follow_each_others_acls_in_kafkas_layout(zk_connect):
    async def scenario():
        brokers = Brokers(zk_connect)
        try:
            a, b = await brokers.store(), await brokers.store()
            assert await a.create([AclBinding(T, READ), AclBinding(SALES, WRITE)]) == [None, None]
            await until(lambda: can(b, Operation.WRITE, "sales-eu"), "prefixed ACL reaches b")
            await until(lambda: can(b, Operation.READ, "t"), "literal ACL reaches b")
            assert not can(b, Operation.WRITE, "t")

            # Kafka 2.x's znodes, JSON and notifications
            data, _ = await a.zk.get("/kafka-acl/Topic/t")
            assert json.loads(data) == {
                "version": 1,
                "acls": [{"principal": ALICE, "permissionType": "Allow", "operation": "Read",
                          "host": "*"}],
            }  # fmt: skip
            data, _ = await a.zk.get("/kafka-acl-extended/prefixed/Topic/sales-")
            assert json.loads(data)["acls"][0]["operation"] == "Write"
            (literal,) = await a.zk.get_children("/kafka-acl-changes")
            assert literal.startswith("acl_changes_")
            assert (await a.zk.get(f"/kafka-acl-changes/{literal}"))[0] == b"Topic:t"
            (extended,) = await a.zk.get_children("/kafka-acl-extended-changes")
            assert json.loads((await a.zk.get(f"/kafka-acl-extended-changes/{extended}"))[0]) == {
                "version": 1, "resourceType": "Topic", "name": "sales-", "patternType": "PREFIXED"
            }  # fmt: skip

            # b deletes, a follows; the emptied znode goes
            ((deleted, error),) = await b.delete([AclBindingFilter(principal=ALICE,
                                                                    operation=Operation.READ)])  # fmt: skip
            assert error is None and deleted == [AclBinding(T, READ)]
            await until(lambda: not can(a, Operation.READ, "t"), "deletion reaches a")
            assert await a.zk.exists("/kafka-acl/Topic/t") is None
            assert can(a, Operation.WRITE, "sales-eu")

            # a broker starting now reads what is there, without the notifications
            c = await brokers.store()
            assert c.authorizer.bindings() == [AclBinding(SALES, WRITE)]
        finally:
            await brokers.close()

    run(scenario())


def test_writers_racing_on_one_resource_both_keep_their_acls(zk_connect):
    async def scenario():
        brokers = Brokers(zk_connect)
        try:
            a, b = await brokers.store(), await brokers.store()
            entries = [
                AccessControlEntry(f"User:u{i}", "*", Operation.READ, Permission.ALLOW)
                for i in range(10)
            ]
            writes = [
                (a if i % 2 else b).create([AclBinding(T, entry)])
                for i, entry in enumerate(entries)
            ]
            assert await asyncio.gather(*writes) == [[None]] * 10
            data, _ = await a.zk.get("/kafka-acl/Topic/t")
            assert len(json.loads(data)["acls"]) == 10
            for store in (a, b):
                await until(lambda s=store: len(s.authorizer.entries(T)) == 10, "all ten cached")
        finally:
            await brokers.close()

    run(scenario())


def test_a_broken_znode_is_skipped_and_the_rest_is_read(zk_connect):
    async def scenario():
        brokers = Brokers(zk_connect)
        try:
            a = await brokers.store()
            await a.create([AclBinding(T, READ)])
            await a.zk.create("/kafka-acl/Topic/broken", b"{not json", makepath=True)
            await a.zk.create(
                f"{z.ACL_LITERAL_CHANGES}/{z.ACL_CHANGE_PREFIX}", b"Topic:broken", sequence=True
            )
            await a.zk.create(f"{z.ACL_LITERAL_CHANGES}/{z.ACL_CHANGE_PREFIX}", b"nonsense",
                              sequence=True)  # fmt: skip
            await a.create([AclBinding(SALES, WRITE)])
            b = await brokers.store()
            assert can(b, Operation.READ, "t") and can(b, Operation.WRITE, "sales-1")
            await b.create([AclBinding(ResourcePattern(ResourceType.TOPIC, "u"), READ)])
            await until(lambda: can(a, Operation.READ, "u"), "later changes still arrive")
        finally:
            await brokers.close()

    run(scenario())
