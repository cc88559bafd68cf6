"""Awaiting a coroutine in a context of its own, inside the running task.

A task runs every step of its coroutine in the context it was created with, so what a turn
makes current (its span) stays inside the turn. `run_in` gives a turn started in a stream's
task the same: each step of the awaitable runs in `context`, whose changes the stream's own
context never sees, and a task created later with the same `context` may go on with it
(a token made in a context can only be reset in it). Cancelling the task awaiting `run_in`
reaches the awaitable as it would reach a task's coroutine.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class _Pass:
    """Hands what the awaitable waits on to the running task, unchanged."""

    __slots__ = ("waited",)

    def __init__(self, waited: Any) -> None:
        self.waited = waited

    def __await__(self) -> Generator[Any, None, None]:
        yield self.waited


async def run_in(context: contextvars.Context, awaitable: Awaitable[T]) -> T:
    """Await `awaitable` with each of its steps run in `context`."""
    steps = awaitable.__await__()
    send, throw = steps.send, steps.throw
    error: BaseException | None = None
    while True:
        try:
            waited = context.run(send, None) if error is None else context.run(throw, error)
        except StopIteration as stop:
            result: T = stop.value
            return result
        error = None
        try:
            await _Pass(waited)
        except BaseException as exc:  # Cancelled: the awaitable gets it where it waits.
            error = exc
