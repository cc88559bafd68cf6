"""In-process wake-ups by topic: the waiters of one store, woken by its own writes and by
whatever the backend learns of other processes' writes."""

from __future__ import annotations

import asyncio
from collections.abc import Collection

from ._turn_events import session_topic


class Wakeups:
    """Waiters registered under topics; `notify` wakes those of one topic.

    A waiter is one future registered under each of its topics. Waking it resolves the
    future (from the future's own loop, whichever thread notifies); the waiter then
    removes itself from every topic. Nothing runs while nobody waits.
    """

    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._count = 0

    @property
    def pending(self) -> int:
        """How many `wait` calls are in progress."""
        return self._count

    async def wait(self, topics: Collection[str], timeout: float) -> None:
        """Return when one of `topics` is notified, or after `timeout` seconds."""
        if timeout <= 0 or not topics:
            await asyncio.sleep(max(timeout, 0))
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        names = frozenset(topics)
        for topic in names:
            self._waiters.setdefault(topic, set()).add(waiter)
        self._count += 1
        timer = loop.call_later(timeout, _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._count -= 1
            for topic in names:
                registered = self._waiters.get(topic)
                if registered is not None:
                    registered.discard(waiter)
                    if not registered:
                        del self._waiters[topic]

    def notify(self, topic: str) -> None:
        """Wake every waiter of `topic`."""
        waiters = self._waiters.pop(topic, None)
        if waiters:
            for waiter in waiters:
                _resolve(waiter)

    def notify_session(self, tenant: str, session_id: str) -> None:
        """Wake the waiters of the session's topic (named only when someone waits: the
        session writes stay as cheap as they were)."""
        if self._count:
            self.notify(session_topic(tenant, session_id))

    def notify_all(self) -> None:
        """Wake every waiter (after a change of unknown topic, or on close)."""
        waiters, self._waiters = self._waiters, {}
        for registered in waiters.values():
            for waiter in registered:
                _resolve(waiter)


def _resolve(waiter: asyncio.Future[None]) -> None:
    loop = waiter.get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        _wake(waiter)
    elif not loop.is_closed():
        loop.call_soon_threadsafe(_wake, waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
