"""A live server on an event loop thread of its own, for synchronous (hypothesis) tests."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager

from .conftest import Live


class Background:
    """Starts the server `start()` gives, runs `prepare` on it, and serves until exit."""

    def __init__(
        self,
        start: Callable[[], AbstractAsyncContextManager[Live]],
        prepare: Callable[[Live], Awaitable[None]],
    ) -> None:
        self._start = start
        self._prepare = prepare
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.env: Live | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        finally:
            self._ready.set()  # also when it failed to start

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with self._start() as env:
            await self._prepare(env)
            self.env = env
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> Live:
        self._thread.start()
        self._ready.wait(60)
        assert self.env is not None, "the server did not start"
        return self.env

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)
