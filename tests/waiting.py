"""Waiting on something a server or a service does on its own time.

A test waits for the event itself (a state it can observe), never for a pause that usually
covers it: a busy machine stretches every pause. The bound only ends a wait that failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final

EVENT_WAIT: Final = 60.0
"""How long a test waits for something done on the server's own time (a lease released, a
turn's end seen, a watcher attached): a bound on a failure, never an expected time."""


async def until(condition: Callable[[], bool], what: str, bound: float = EVENT_WAIT) -> None:
    """Return once `condition()` holds, looked at every few milliseconds; fail, saying `what`
    never happened, after `bound` seconds."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + bound
    while not condition():
        if loop.time() > give_up:
            raise AssertionError(f"{what} never happened")
        await asyncio.sleep(0.01)


async def until_async(
    condition: Callable[[], Awaitable[bool]],
    what: str,
    bound: float = EVENT_WAIT,
    pause: float = 0.01,
) -> None:
    """`until` for a condition that has to be asked for (a call to a server)."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + bound
    while not await condition():
        if loop.time() > give_up:
            raise AssertionError(f"{what} never happened")
        await asyncio.sleep(pause)
