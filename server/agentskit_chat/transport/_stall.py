"""Turn streams whose client stops reading may not hold a session past the turn timeout.

A stream's events wait for the client's flow-control window. A client that stops reading
(and never cancels) would otherwise keep its turn, and the session's lease, suspended in
that wait until the lease lapses, and hold up a drain for the whole grace period. Each
event must leave before the turn's deadline (the terminal one, sent after the lease is
released, within TERMINAL_SEND_SECONDS): otherwise the turn is closed, which releases its
lease as a cancellation does, the transport's `stalled` callback ends the call with a
status, and the call's handler is cancelled.

A grpc.aio server cannot reset one stream: the status it sends waits behind the events the
client has not read, so a client that reads again gets its events and then the status. A
client that never reads again sees its call end on the wire at its own deadline (gRPC
sends the deadline's trailers and RST_STREAM whatever is unread) or when its connection
reaches its maximum age (GOAWAY, then the connection is closed after the age's grace).
The HTTP listener can reset one stream: it does so when the status has not reached the
client within its own grace (see `transport.web.boundary.streams`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable
from types import TracebackType
from typing import Any, Final, Self

log = logging.getLogger("agentskit_chat.transport")

TERMINAL_SEND_SECONDS: Final = 5.0


class StallWatch:
    """Watches one turn stream's sends and closes its events; use as an async context
    manager around the stream, which reads the events only through it:

        async with StallWatch(events, deadline, stalled) as watch:
            async for event in watch.events:
                watch.sending(terminal=...)
                yield event
                await watch.sent()

    Once the watch stalled, the events are closed by a task of its own (the call may be
    waiting on its client meanwhile): `sent` and the exit wait for that close instead of
    reading or closing the events themselves, so a client that reads again while the turn
    still releases its lease never resumes a generator that is closing.
    """

    def __init__(
        self,
        events: AsyncGenerator[Any, None],
        deadline: float,
        stalled: Callable[[], None] | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._call = asyncio.current_task()
        self._events = events
        self._deadline = deadline
        self._stalled_callback = stalled
        self._timer: asyncio.Handle | None = None
        """The terminal event's send timer, or the stall of a send started past the deadline."""
        self._deadline_timer: asyncio.TimerHandle | None = None
        """One timer at the deadline for the whole stream (not one per event)."""
        self._waiting = False
        """A non-terminal event is waiting for the client."""
        self._late = False
        """The deadline passed while no event waited for the client."""
        self._ending: asyncio.Task[None] | None = None

    @property
    def events(self) -> AsyncGenerator[Any, None]:
        """The watched events."""
        return self._events

    def sending(self, *, terminal: bool) -> None:
        """An event is about to wait for the client."""
        if terminal:
            self._timer = self._loop.call_at(
                self._loop.time() + TERMINAL_SEND_SECONDS, self._stalled
            )
        elif self._late:
            self._timer = self._loop.call_soon(self._stalled)  # It cannot leave in time.
        else:
            self._waiting = True
            if self._deadline_timer is None:
                self._deadline_timer = self._loop.call_at(self._deadline, self._at_deadline)

    async def sent(self) -> None:
        """The event left. When the watch stalled meanwhile, wait until the events are
        closed (the call is then cancelled): they must not be read again."""
        self._disarm()
        if self._ending is not None:
            await asyncio.shield(self._ending)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._disarm()
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        if self._ending is not None:
            await asyncio.shield(self._ending)  # closing them a second time would fail
        else:
            await self._events.aclose()

    def _disarm(self) -> None:
        self._waiting = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _at_deadline(self) -> None:
        self._deadline_timer = None
        if self._waiting:
            self._stalled()
        else:
            self._late = True

    def _stalled(self) -> None:
        self._timer = None
        self._waiting = False
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        log.warning("turn stream stalled: the client stopped reading; cancelling the call")
        if self._stalled_callback is not None:
            self._stalled_callback()
        self._ending = asyncio.ensure_future(self._end())

    async def _end(self) -> None:
        # The stream waits on its client (the timer only runs then) and reads nothing more
        # once `_ending` is set: the events are suspended, and only this closes them.
        try:
            await self._events.aclose()
        except Exception as exc:  # The turn's own cleanup failed: the call ends all the same.
            log.warning("closing a stalled turn failed: %s", type(exc).__name__)
        finally:
            if self._call is not None:
                self._call.cancel()
