"""Running a test's coroutine, and waiting inside one, for tests that drive asyncio code
(ZooKeeper listeners, TLS sessions, the controller) without a broker process."""

from __future__ import annotations

import asyncio
import inspect


def run(coro, timeout_s: float = 60):
    """Run `coro` to its end on a fresh loop; fail it after `timeout_s`."""
    return asyncio.run(asyncio.wait_for(coro, timeout_s))


async def until(condition, what: str = "condition", timeout_s: float = 15.0):
    """Let the loop run until `condition()` (a value, or an awaitable of one) is truthy;
    return it. Fail naming `what` after `timeout_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if loop.time() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:g} s")
        await asyncio.sleep(0.05)


async def settle(busy, turns: int = 20) -> None:
    """Let the loop run until `busy()` has been false for `turns` consecutive turns: for
    code whose every step is in process (no timers, no I/O), everything that will happen
    has happened then, so an absence can be asserted without waiting on a clock."""
    quiet = 0
    for _ in range(100_000):
        await asyncio.sleep(0)
        quiet = 0 if busy() else quiet + 1
        if quiet >= turns:
            return
    raise AssertionError("still busy after 100000 turns of the loop")
