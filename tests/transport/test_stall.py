"""StallWatch on its own: one deadline timer for a stream's events, and the terminal
event's own allowance."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from agentskit_chat.transport._stall import StallWatch


async def _events() -> AsyncGenerator[int, None]:
    for n in range(3):
        yield n


def test_an_event_still_waiting_for_its_client_at_the_deadline_stalls_the_stream() -> None:
    async def scenario() -> list[str]:
        stalled: list[str] = []

        async def call() -> None:
            loop = asyncio.get_running_loop()
            async with StallWatch(_events(), loop.time() + 0.05, lambda: stalled.append("x")) as w:
                async for _ in w.events:
                    w.sending(terminal=False)
                    await asyncio.sleep(1)  # the client does not read
                    await w.sent()

        task = asyncio.ensure_future(call())
        await asyncio.wait((task,), timeout=2)
        assert task.done()  # the watch cancelled the call
        return stalled

    assert asyncio.run(scenario()) == ["x"]


def test_events_sent_in_time_leave_no_timer_behind() -> None:
    async def scenario() -> list[str]:
        stalled: list[str] = []
        loop = asyncio.get_running_loop()
        async with StallWatch(_events(), loop.time() + 0.05, lambda: stalled.append("x")) as w:
            async for n in w.events:
                w.sending(terminal=n == 2)
                await asyncio.sleep(0)
                await w.sent()
        await asyncio.sleep(0.1)  # past the deadline: nothing fires once the stream ended
        return stalled

    assert asyncio.run(scenario()) == []


def test_an_event_that_starts_waiting_after_the_deadline_stalls_the_stream() -> None:
    async def scenario() -> list[str]:
        stalled: list[str] = []

        async def call() -> None:
            loop = asyncio.get_running_loop()
            async with StallWatch(_events(), loop.time() + 0.05, lambda: stalled.append("x")) as w:
                async for _ in w.events:
                    w.sending(terminal=False)
                    await asyncio.sleep(0)
                    await w.sent()
                    await asyncio.sleep(0.1)  # the turn works past the deadline

        task = asyncio.ensure_future(call())
        await asyncio.wait((task,), timeout=2)
        assert task.done()
        return stalled

    assert asyncio.run(scenario()) == ["x"]


def test_the_terminal_event_has_its_own_allowance_past_the_deadline() -> None:
    async def scenario() -> list[str]:
        stalled: list[str] = []
        loop = asyncio.get_running_loop()
        async with StallWatch(_events(), loop.time() + 0.05, lambda: stalled.append("x")) as w:
            async for n in w.events:
                if n < 2:
                    continue
                await asyncio.sleep(0.1)  # past the deadline, no event waiting
                w.sending(terminal=True)
                await asyncio.sleep(0.05)  # well inside the terminal allowance
                await w.sent()
        return stalled

    assert asyncio.run(scenario()) == []
