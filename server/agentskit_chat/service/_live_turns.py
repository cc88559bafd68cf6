"""Turns that run in a task of their own, publishing into their event log.

The stream that starts a turn is the log's first reader, from the start. It paces the
turn: past `PACE_EVENTS` events or `PACE_BYTES` that the stream has not asked past,
the turn waits until the stream asks for the next event (so a client that stops reading
stops the model stream, as the stream's flow control did when the turn ran inside it).
Closing it cancels the turn exactly as closing the turn's own events did: the lease is
released and nothing more is committed; the close returns once the turn ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Final

from ._event_log import (
    EVENT_BYTES,
    MAX_EVENTS,
    EventLogs,
    LogFullError,
    LogKey,
    MemoryEventLog,
)
from ._limits import Limits
from ._tenancy import current_principal
from ._terminal import OUTPUT_LIMIT, failure
from ._types import TurnEvent, TurnRequest

PACE_EVENTS: Final = 8
"""Events a turn may run ahead of the stream that started it."""
PACE_BYTES: Final = 16 * 1024
"""Bytes (as its log counts them) a turn may run ahead of the stream that started it: a
larger event waits until the stream asks for the next one, as when the turn ran inside the
stream."""
TEXT_SLACK: Final = 64 * 1024
"""Bytes a log holds beyond twice the output limit (the deltas and the answer) and
`EVENT_BYTES` for each of its events."""


class LiveTurns:
    """Starts turns in tasks of their own; each publishes into a log kept in `logs`."""

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self.logs = EventLogs()

    def start(
        self, request: TurnRequest, events: AsyncGenerator[TurnEvent, None]
    ) -> AsyncGenerator[tuple[int, TurnEvent], None]:
        """(sequence, event) for each event of the turn `events` (of `request`), read from
        its log. The turn runs in a task of its own, started by the first step of the
        returned stream, in the caller's context (its principal and its span): a stream
        closed before it started runs nothing."""
        key = (current_principal().tenant, request.session_id, request.turn_id)
        max_bytes = 2 * self._limits.max_output_bytes + (MAX_EVENTS + 1) * EVENT_BYTES + TEXT_SLACK
        log = MemoryEventLog(max_bytes)
        return log.read(publish=lambda: asyncio.ensure_future(self._publish(events, log, key)))

    async def _publish(
        self,
        events: AsyncGenerator[TurnEvent, None],
        log: MemoryEventLog,
        key: LogKey,
    ) -> None:
        kept = self.logs.open(key, log)
        error: BaseException | None = None
        full = False
        try:
            async with aclosing(events) as turn:
                async for event in turn:
                    try:
                        sequence = log.append(event)
                    except LogFullError:
                        full = True  # Leaving closes the turn: nothing more is committed.
                        break
                    count, size = log.ahead()
                    if count > PACE_EVENTS or size > PACE_BYTES:
                        await log.wait_taken(sequence)
            if full:
                log.append(failure(OUTPUT_LIMIT))
        except asyncio.CancelledError as cancelled:
            error = cancelled
            raise
        except Exception as exc:  # The readers get it: a refusal before the turn ran.
            error = exc
        finally:
            log.end(error)
            if kept:
                self.logs.ended(key, keep=error is None)
