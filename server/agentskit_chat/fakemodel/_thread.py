"""The fake model server on a thread of its own, for synchronous tests and programs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from types import TracebackType
from typing import Final, Self

from ._core import FakeModel
from ._scripts import Reply, Script
from ._stream import RecordedRequest

START_TIMEOUT: Final = 10.0


class FakeModelServer:
    """Runs a FakeModel on a background thread with its own event loop.

    `with FakeModelServer() as server:` (or `async with`) starts and stops it; `server.url`
    is the base URL. Waiting methods block: from async code, call them through
    `asyncio.to_thread`.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        default: Reply | None = None,
        answers: Mapping[str, Script] | None = None,
        tool_reply: Script | None = None,
        after_tools: Script | None = None,
    ) -> None:
        self.model = FakeModel(default, answers, tool_reply=tool_reply, after_tools=after_tools)
        self._address = (host, port)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        """The base URL to configure as `base_url`, ending in `/v1`."""
        return self.model.url

    @property
    def port(self) -> int:
        """The port listened on."""
        return self.model.port

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, oldest first."""
        return self.model.requests

    def enqueue(self, *scripts: Script) -> None:
        """Answer the next requests with `scripts`, in order."""
        self.model.enqueue(*scripts)

    def wait_disconnect(self, timeout: float | None = None) -> bool:
        """Block until a client left in the middle of an answer; False after `timeout`."""
        return self.model.wait_disconnect(timeout)

    def resume(self) -> None:
        """Let paused replies continue."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.model.resume)

    def start(self) -> Self:
        """Start listening; returns once the port is bound."""
        if self._thread is not None:
            raise RuntimeError("the fake model server is already started")
        self._thread = threading.Thread(target=self._run, name="fake-model-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT):
            raise RuntimeError("the fake model server did not start")
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        """Cut open connections, stop listening and end the thread."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        thread.join(START_TIMEOUT)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        try:
            await self.model.start(*self._address)
        except BaseException as exc:
            self._error = exc
            return
        finally:
            self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            await self.model.close()
