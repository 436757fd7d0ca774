"""Running a test's coroutine, and waiting inside one, for tests that drive asyncio code
(ZooKeeper listeners, TLS sessions) without a broker process."""

from __future__ import annotations

import asyncio


def run(coro, timeout_s: float = 60):
    """Run `coro` to its end on a fresh loop; fail it after `timeout_s`."""
    return asyncio.run(asyncio.wait_for(coro, timeout_s))


async def until(condition, what: str) -> None:
    """Let the loop run until `condition()` holds; fail naming `what` after 15 s."""
    for _ in range(300):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what}: not within 15 s")
