"""The event log of one turn: its events numbered from 1, read by any number of readers.

A turn publishes into its log; every stream of the turn is a reader of it from some
sequence on, so two views of one turn can never disagree. A reader that starts after
sequence N gets every later event exactly once and in order: first those already
appended, then live ones as they come, then the end (the terminal event was the last one
appended; a turn refused before it ran ends with its error instead).

`EventLog` is the port; `MemoryEventLog` keeps the events in this process (a log in the
store, for other workers and replicas, is another implementation of it). A log holds at
most `max_events` events before its terminal one, and `max_bytes` bytes, counted as the
UTF-8 text of its deltas and completed answer plus `EVENT_BYTES` per event: the output
limit already bounds a turn's text, so a log is full only for a turn streaming far more
chunks than any model sends. Readers only hold a position in the log, so a slow reader
never makes it hold more. `EventLogs` keeps each turn's log while the turn runs and
`RETENTION_SECONDS` after it ended, within `MAX_KEPT_LOGS` and `MAX_KEPT_BYTES` for the
ended ones (the oldest go first).

An event's time is fixed when it is published: `stamped` gives it the time it is appended
(or reached, for a turn that streams without a log), and every view of it, here or read
back from the store on another process, carries that time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable
from typing import Final, Protocol

from ._limits import utf8_size
from ._types import Completed, Delta, Failed, ToolDelta, ToolEnded, TurnEvent

MAX_EVENTS: Final = 65_536
"""Events one turn's log holds before its terminal event (which always fits): a started, a
decision and the deltas."""
RETENTION_SECONDS: Final = 60.0
"""How long the log of an ended turn is kept."""
MAX_KEPT_LOGS: Final = 4096
"""Ended logs kept at once; past it the oldest is dropped before its time."""
MAX_KEPT_BYTES: Final = 64 * 1024 * 1024
"""Bytes (as a log counts them) of the ended logs kept at once; past it the oldest are
dropped before their time."""
EVENT_BYTES: Final = 128
"""What a log counts for one event besides its text: the event object and its place."""

LogKey = tuple[str, str, str]
"""(tenant, session id, turn id)."""


class LogFullError(Exception):
    """An append would take a log past its bound."""


class EventLog(Protocol):
    """The port: one turn's append-only, numbered events."""

    @property
    def last(self) -> int:
        """The sequence of the newest event (0 before the first)."""
        ...

    @property
    def ended(self) -> bool:
        """Whether the log has ended: nothing more will be appended."""
        ...

    @property
    def size(self) -> int:
        """Bytes held: the events' text and `EVENT_BYTES` for each."""
        ...

    def append(self, event: TurnEvent) -> int:
        """Add `event` (stamped with the time now, unless it has its time) and return its
        sequence; LogFullError past the bound."""
        ...

    def end(self, error: BaseException | None = None) -> None:
        """Nothing more follows; readers get `error` (when given) after the last event."""
        ...

    def read(
        self, after: int = 0, *, publish: Callable[[], asyncio.Future[None]] | None = None
    ) -> AsyncGenerator[tuple[int, TurnEvent], None]:
        """(sequence, event) for every event after sequence `after`, live ones included,
        until the end. A reader given `publish` leads the log: it starts the task that
        publishes into it at its first step, and closing the reader before the end cancels
        that task and returns once it ended."""
        ...


def stamped(event: TurnEvent, now_ns: int | None = None) -> TurnEvent:
    """`event` with its publication time: the one it has, else `now_ns` (now when None)."""
    if event.time_ns:
        return event
    return dataclasses.replace(event, time_ns=time.time_ns() if now_ns is None else now_ns)


def event_size(event: TurnEvent) -> int:
    """The bytes a log counts for `event` against its bound."""
    if isinstance(event, Delta):
        return EVENT_BYTES + _text_size(event.text)
    if isinstance(event, ToolDelta | ToolEnded):
        return EVENT_BYTES + _text_size(event.arguments)
    if isinstance(event, Completed):
        calls = sum(_text_size(call.arguments) for call in event.tool_calls)
        return EVENT_BYTES + _text_size(event.content) + calls
    return EVENT_BYTES


def _text_size(text: str) -> int:
    return len(text) if text.isascii() else utf8_size(text)


async def _closed(publisher: asyncio.Future[None]) -> None:
    """Cancel `publisher` unless it is done, and wait for its end."""
    if not publisher.done():
        publisher.cancel()
        await asyncio.wait((publisher,))
    if not publisher.cancelled():
        publisher.exception()  # Retrieved: its readers got it.


class MemoryEventLog:
    """An `EventLog` in this process's memory."""

    def __init__(self, max_bytes: int, max_events: int = MAX_EVENTS) -> None:
        self._events: list[TurnEvent] = []
        self._size = 0
        self._max_bytes = max_bytes
        self._max_events = max_events
        self._ended = False
        self._error: BaseException | None = None
        self._waiting: list[asyncio.Future[None]] = []
        """Readers waiting for the next event."""
        self._sizes: list[int] = []
        """Bytes up to and including each event."""
        self.taken = 0
        """The highest sequence a reader is done with: it asked for the next one."""
        self._taking: asyncio.Event | None = None
        self.name: str | None = None
        """Which run of its turn the log holds (see `LiveTurns`), once the turn claimed."""

    @property
    def last(self) -> int:
        return len(self._events)

    @property
    def ended(self) -> bool:
        return self._ended

    @property
    def size(self) -> int:
        return self._size

    def append(self, event: TurnEvent) -> int:
        if self._ended:
            raise RuntimeError("the log has ended")
        size = event_size(event)
        full = len(self._events) >= self._max_events and not isinstance(event, Completed | Failed)
        if full or self._size + size > self._max_bytes:
            raise LogFullError
        self._events.append(stamped(event))
        self._size += size
        self._sizes.append(self._size)
        if self._waiting:
            self._wake()
        return len(self._events)

    def between(self, after: int, upto: int) -> list[TurnEvent]:
        """The events numbered `after` + 1 to `upto`."""
        return self._events[after:upto]

    @property
    def terminal(self) -> bool:
        """Whether the newest event ends the turn (nothing follows it)."""
        return bool(self._events) and isinstance(self._events[-1], Completed | Failed)

    def _wake(self) -> None:
        for waiter in self._waiting:
            if not waiter.done():
                waiter.set_result(None)
        self._waiting.clear()

    def end(self, error: BaseException | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        self._error = error
        self._wake()

    async def read(
        self, after: int = 0, *, publish: Callable[[], asyncio.Future[None]] | None = None
    ) -> AsyncGenerator[tuple[int, TurnEvent], None]:
        """See `EventLog.read`."""
        if not 0 <= after <= len(self._events):
            raise ValueError(f"no sequence {after} in this log")
        events = self._events
        position = after
        publisher = None if publish is None else publish()  # in the reader's context
        try:
            while True:
                while position < len(events):
                    position += 1
                    yield position, events[position - 1]
                    if position > self.taken:  # The reader asked for the next event.
                        self.taken = position
                        if self._taking is not None:
                            self._taking.set()
                if self._ended:
                    if self._error is not None:
                        raise self._error
                    return
                waiter = asyncio.get_running_loop().create_future()
                self._waiting.append(waiter)
                await waiter  # Cancelling it cancels this reader only: each has its own.
        finally:
            if publisher is not None:
                await _closed(publisher)

    def ahead(self) -> tuple[int, int]:
        """Events and bytes appended after the last event a reader is done with."""
        taken = self.taken
        return len(self._events) - taken, self._size - (self._sizes[taken - 1] if taken else 0)

    async def wait_taken(self, sequence: int) -> None:
        """Return once a reader is done with the event at `sequence` (a publisher paces
        itself by its readers with this)."""
        while self.taken < sequence:
            if self._taking is None:
                self._taking = asyncio.Event()
            self._taking.clear()
            await self._taking.wait()


class EventLogs:
    """The logs of this process's turns: kept while a turn runs, and for `retention`
    seconds after it ended (within `max_kept` logs and `max_kept_bytes`)."""

    def __init__(
        self,
        *,
        retention: float = RETENTION_SECONDS,
        max_kept: int = MAX_KEPT_LOGS,
        max_kept_bytes: int = MAX_KEPT_BYTES,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.retention = retention
        """Seconds an ended log is kept (and its copy in the store, see `TurnBus`)."""
        self._max_kept = max_kept
        self._max_kept_bytes = max_kept_bytes
        self._clock = clock or time.monotonic
        self._running: dict[LogKey, MemoryEventLog] = {}
        self._kept: OrderedDict[LogKey, tuple[float, MemoryEventLog]] = OrderedDict()
        self._kept_bytes = 0

    def open(self, key: LogKey, log: MemoryEventLog) -> bool:
        """Keep `log` as the turn `key`'s log, unless a running turn's log is kept for it
        already (then nobody else finds `log`); whether it is kept. The kept log of an
        ended run of the turn (one that committed nothing, so the id runs again) is
        replaced: readers from then on find the new run."""
        if key in self._running:
            return False
        ended = self._kept.pop(key, None)
        if ended is not None:
            self._kept_bytes -= ended[1].size
        self._running[key] = log
        return True

    def running(self, key: LogKey) -> MemoryEventLog | None:
        """The log of the turn `key` while it runs."""
        return self._running.get(key)

    def find(self, key: LogKey) -> MemoryEventLog | None:
        """The kept log of the turn `key`, running or ended less than `retention` ago."""
        self._prune()
        running = self._running.get(key)
        if running is not None:
            return running
        kept = self._kept.get(key)
        return None if kept is None else kept[1]

    def ended(self, key: LogKey, *, keep: bool = True) -> None:
        """The turn `key` ended: keep its log for the retention time (or drop it now)."""
        log = self._running.pop(key, None)
        if log is None:
            return
        if keep:
            self._kept[key] = (self._clock() + self.retention, log)
            self._kept_bytes += log.size
        self._prune()

    @property
    def kept(self) -> int:
        """Logs kept: running and ended."""
        return len(self._running) + len(self._kept)

    def _prune(self) -> None:
        kept = self._kept
        if not kept:
            return
        now = self._clock()
        while kept:
            key, (until, log) = next(iter(kept.items()))
            over = len(kept) > self._max_kept or self._kept_bytes > self._max_kept_bytes
            if until > now and not over:
                return
            del kept[key]
            self._kept_bytes -= log.size
