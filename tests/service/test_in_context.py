"""Awaiting in a context of one's own: each step runs there, the caller's context never sees
it, a task may go on in it, and a cancellation reaches the awaitable where it waits."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from agentskit_chat.service._in_context import run_in

CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("current", default="outer")


def test_each_step_runs_in_the_given_context_and_the_callers_never_sees_it() -> None:
    async def scenario() -> None:
        seen: list[str] = []

        async def steps() -> str:
            seen.append(CURRENT.get())
            token = CURRENT.set("inner")
            await asyncio.sleep(0)  # a bare step
            seen.append(CURRENT.get())
            await asyncio.sleep(0.01)  # a wait on a future
            seen.append(CURRENT.get())
            CURRENT.reset(token)  # a token made here is reset here
            return "done"

        context = contextvars.copy_context()
        assert await run_in(context, steps()) == "done"
        assert seen == ["outer", "inner", "inner"]
        assert CURRENT.get() == "outer"

    asyncio.run(scenario())


def test_a_task_goes_on_in_the_same_context() -> None:
    async def scenario() -> None:
        context = contextvars.copy_context()
        token = await run_in(context, _set("inner"))
        assert CURRENT.get() == "outer"

        async def later() -> str:
            value = CURRENT.get()
            CURRENT.reset(token)  # would raise in any other context
            return value

        task = asyncio.get_running_loop().create_task(later(), context=context)
        assert await task == "inner"
        assert context.run(CURRENT.get) == "outer"

    asyncio.run(scenario())


def test_cancelling_the_caller_reaches_the_awaitable_where_it_waits() -> None:
    async def scenario() -> None:
        waiting = asyncio.Event()
        cleaned: list[str] = []

        async def steps() -> None:
            try:
                waiting.set()
                await asyncio.Event().wait()
            finally:
                await asyncio.sleep(0.01)  # a closing write, still awaited
                cleaned.append(CURRENT.get())

        async def caller() -> None:
            context = contextvars.copy_context()
            context.run(CURRENT.set, "inner")
            await run_in(context, steps())

        task = asyncio.ensure_future(caller())
        await waiting.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert cleaned == ["inner"]

    asyncio.run(scenario())


async def _set(value: str) -> contextvars.Token[str]:
    await asyncio.sleep(0)
    return CURRENT.set(value)
