"""Producer ids, unique for the life of the cluster.

Ids are handed out from blocks reserved in a file (ZooKeeper's
/latest_producer_id_block in cluster mode), so a restart never reuses an id whose
sequences may still be remembered by a partition.
"""

from __future__ import annotations

import json
from pathlib import Path

from broker.util.files import write_atomically

BLOCK_SIZE = 1000


class NoIdAtHand(Exception):
    """No producer id can be given without waiting (a cluster broker between blocks)."""


def allocate_now(allocator) -> int:
    """An id from `allocator` (either class below) at once, or NoIdAtHand: for the
    transaction coordinator's decisions, which ask for an id before changing anything,
    so a caller can answer or decide again once an id is at hand."""
    pid = allocator.allocate()
    if pid is None:
        raise NoIdAtHand
    return pid


class ProducerIdAllocator:
    def __init__(self, path: Path, block_size: int = BLOCK_SIZE) -> None:
        self.path = path
        self.block_size = block_size
        self._next = 0
        self._block_end = 0

    def _reserve_block(self) -> None:
        start = 0
        if self.path.exists():
            start = json.loads(self.path.read_text())["block_end"]
        end = start + self.block_size
        # Durable before any id of the block is handed out: a restart must start past it.
        write_atomically(
            self.path, json.dumps({"version": 1, "block_start": start, "block_end": end})
        )
        self._next, self._block_end = start, end

    def allocate(self) -> int | None:
        if self._next >= self._block_end:
            self._reserve_block()
        pid = self._next
        self._next += 1
        return pid


class ZkProducerIdBlocks:
    """Producer ids of a cluster: blocks reserved in ZooKeeper's /latest_producer_id_block
    with a conditional update, so no two brokers ever hand out the same id. The next
    block is fetched in the background before this one runs out; when it has not come
    yet, `allocate()` says None and the caller awaits `next_id()`."""

    def __init__(self, zk, broker_id: int, spawn, block_size: int = BLOCK_SIZE) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.spawn = spawn
        self.block_size = block_size
        self._blocks: list[tuple[int, int]] = []  # (next, end exclusive)
        self._fetching = None

    def allocate(self) -> int | None:
        while self._blocks and self._blocks[0][0] >= self._blocks[0][1]:
            self._blocks.pop(0)
        remaining = sum(end - nxt for nxt, end in self._blocks)
        if remaining < self.block_size // 10 and self._fetching is None:
            self._fetching = self.spawn(self._fetch())
        if not self._blocks:
            return None
        pid, end = self._blocks[0]
        self._blocks[0] = (pid + 1, end)
        return pid

    async def next_id(self) -> int:
        while True:
            pid = self.allocate()
            if pid is not None:
                return pid
            await self._fetching

    async def _fetch(self) -> None:
        from broker.zk import layout as z
        from broker.zk.client import BadVersionError, NodeExistsError

        try:
            while True:
                found = await self.zk.get(z.PRODUCER_ID_BLOCK)
                first = 0 if found is None else z.decode_producer_id_block(found[0])[1] + 1
                data = z.encode_producer_id_block(
                    self.broker_id, first, first + self.block_size - 1
                )
                try:
                    if found is None:
                        await self.zk.create(z.PRODUCER_ID_BLOCK, data)
                    else:
                        await self.zk.set(z.PRODUCER_ID_BLOCK, data, found[1].version)
                except (BadVersionError, NodeExistsError):
                    continue  # another broker took that block: take the next
                self._blocks.append((first, first + self.block_size))
                return
        finally:
            self._fetching = None
