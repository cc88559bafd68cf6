"""Waiting on something a server or a service does on its own time.

A test waits for the event itself (a state it can observe), never for a pause that usually
covers it: a busy machine stretches every pause. The bound only ends a wait that failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
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


async def longer_deadlines(
    tmp_path: Path, attempt: Callable[[Path, float], Awaitable[bool]]
) -> None:
    """Run `attempt(folder, deadline)` with deadlines from 0.3 s, doubled each time it
    returns False (the deadline passed before the scenario got far enough to check
    anything: a busy machine), each in a folder of its own."""
    deadline = 0.3
    for round_ in range(8):
        folder = tmp_path / str(round_)
        folder.mkdir()
        if await attempt(folder, deadline):
            return
        deadline *= 2
    raise AssertionError("every deadline passed before the turn got far enough")
