"""The cleaner's map from each key to the latest offset holding it, bounded in memory
(`log.cleaner.dedupe.buffer.size`, shared by the cleaner threads).

Kafka's SkimpyOffsetMap keeps a 16-byte MD5 of each key and an 8-byte offset in a
preallocated array, 24 bytes an entry; two keys with one hash would silently keep the
wrong record. Here a dict holds the keys themselves, so the map is exact, and each new
key is charged what an entry costs in CPython (the key's bytes plus about 100 bytes of
bytes object, int and dict slot, measured with tracemalloc), so the map never grows past
its budget. The cost: about a quarter of Kafka's keys per byte of buffer.
"""

from __future__ import annotations

from collections.abc import Sequence

# Bytes one entry costs beyond the key's own bytes.
ENTRY_OVERHEAD = 100


class OffsetMap:
    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self.used_bytes = 0
        self._offsets: dict[bytes, int] = {}
        # latest(key, default): the latest offset of `key` (the dict's own get: the
        # cleaner calls it once per record).
        self.latest = self._offsets.get

    def __len__(self) -> int:
        return len(self._offsets)

    def put_all(self, entries: Sequence[tuple[bytes, int]]) -> bool:
        """Record every (key, offset) of one batch, in offset order, or none of them if
        its new keys do not fit in the budget (then False)."""
        offsets = self._offsets
        new = {key for key, _ in entries if key not in offsets}
        cost = sum(len(key) for key in new) + ENTRY_OVERHEAD * len(new)
        if self.used_bytes + cost > self.budget_bytes:
            return False
        self.used_bytes += cost
        offsets.update(entries)
        return True
