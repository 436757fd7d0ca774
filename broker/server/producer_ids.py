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

    def allocate(self) -> int:
        if self._next >= self._block_end:
            self._reserve_block()
        pid = self._next
        self._next += 1
        return pid
