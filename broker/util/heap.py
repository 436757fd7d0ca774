"""Keep Python's cyclic garbage collector off the broker's long-lived state.

A broker holding 10,000 partitions holds millions of objects (logs, segments, indexes,
partition and metadata states) that live as long as it does. CPython's full
collection walks all of them, and it runs whenever the objects that survived since the
last one reach a quarter of the heap: exactly what a failover or a topic creation does
(thousands of new states). Measured on the 10,000-partition sweep (issue 23): gen-2
collections of 250-740 ms each, 15 s of them over the three brokers' create, failover
and controller failover steps, finding nothing to collect.

`gc.freeze()` moves every object the collector tracks into a permanent generation it
never walks (what long-running servers do after start-up). So, in a broker's own
process only (`Broker.run_until_signalled`; never in a process hosting other things,
such as the tests, whose cycles it would keep): freeze after start-up and after every
full collection (what survived it just proved long-lived). The next full collection
then walks only what survived since, and comes once those are a quarter of the frozen
heap's size (CPython's rule); young objects are collected as usual. What freezing gives
up: a reference cycle among frozen objects that later becomes garbage is not freed
(reference counting frees everything else). So every `THAW_INTERVAL_MS` the permanent
generation goes back to the collector; its next full collection reclaims such cycles
and freezes the rest again.
"""

from __future__ import annotations

import asyncio
import gc

from broker.util.clock import now_ms as clock_ms

# How often frozen objects go back to the collector, so cycles that died among them are
# reclaimed (one full walk of the heap per interval at most).
THAW_INTERVAL_MS = 10 * 60 * 1000


class HeapFreezer:
    def __init__(self, now_ms: int) -> None:
        self._thawed_at = now_ms
        self.freezes = 0  # how many times the heap was frozen (tests, logs)
        gc.callbacks.append(self._collected)

    def close(self) -> None:
        if self._collected in gc.callbacks:
            gc.callbacks.remove(self._collected)

    def _collected(self, phase: str, info: dict) -> None:
        # Right after a full collection: what survived it is long-lived. Freezing here,
        # not on the next tick, matters: the collections worth avoiding come one after
        # another inside one long handler (a LeaderAndIsr creating 10,000 logs), with no
        # tick between them. The collection is over and its lists consistent; freezing
        # only moves them to the permanent generation.
        if phase == "stop" and info["generation"] == 2:
            self.freeze_now()

    def freeze_now(self) -> None:
        """Move everything the collector tracks now to the permanent generation."""
        gc.freeze()
        self.freezes += 1

    async def run(self) -> None:
        """Thaw every THAW_INTERVAL_MS until cancelled."""
        try:
            while True:
                await asyncio.sleep(1)
                self.tick(clock_ms())
        finally:
            self.close()

    def tick(self, now_ms: int) -> None:
        if now_ms - self._thawed_at >= THAW_INTERVAL_MS:
            self._thawed_at = now_ms
            gc.unfreeze()  # its next full collection walks (and then freezes) them all
