"""The store as the bus between processes for live turns: batches of a turn's events,
signals to the process running a turn, and the expiry of both.

What is kept, and for how long: every turn that claimed writes, when it ends, what it has
not written yet in one final batch, so a reattach during the retention after the end, on
any process, gets its events (as one on the process that ran it gets them from the kept
log). Before that, a turn that continues past its stream writes its events so far when the
stream goes (a reattach elsewhere finds them at once); a turn a watcher on another process
follows live (a PUBLISH signal) writes them as they come, in batches (see `BatchWriter`).
A running turn's batches expire `turn_timeout` + the retention after they are written, the
final one (holding the terminal event) the retention (`RETENTION_SECONDS`, that of the
process's kept logs) after the turn ended; readers pass the time and never get what
expired, swept or not. A turn writes at
most its log's bound (its events and text, which the output limit bounds), in one batch per
`BATCH_SECONDS` at most. Batches of client-held sessions are sealed. Each process sweeps
what expired every `SWEEP_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Final, cast

from agentskit_chat.conversation import ResponseSealer
from agentskit_chat.storage import Store
from agentskit_chat.storage._turn_events import (
    EXPIRE_LIMIT,
    EventBatch,
    SignalKind,
    TurnEventStore,
    TurnKey,
    TurnSignal,
)

from ._event_log import RETENTION_SECONDS, MemoryEventLog
from ._guarded_port import GuardedPort
from ._limits import Limits
from ._records import now_ms
from ._turn_codec import BatchCodec

log = logging.getLogger(__name__)

SWEEP_SECONDS: Final = 30.0
"""How often each process drops expired batches and signals."""
SIGNAL_POLL_SECONDS: Final = 0.25
"""Time between two looks at this process's signals while it runs turns. The process
does not wait on its holder topic: on SQLite a wait makes the store poll for other
processes' writes every 50 ms as long as it lasts, which would cost a process running one
long turn far more CPU than the turn itself; one small query every quarter second costs
little anywhere, and bounds how long a cancel or a publish request waits."""
BATCH_SECONDS: Final = 0.2
"""Shortest time between two writes of one turn's events, but for its final batch: the
events of the meantime go in one batch (a model streaming a chunk every few milliseconds
costs a write per `BATCH_SECONDS`, not one per chunk)."""

Track = Callable[[Coroutine[Any, Any, object]], "asyncio.Task[object]"]


def event_port(store: Store) -> TurnEventStore | None:
    """The store's live-turn port, when it implements one."""
    needed = (
        "append_events",
        "read_events",
        "newest_run",
        "send_signal",
        "take_signals",
        "expire",
        "wait",
    )
    if all(callable(getattr(store, name, None)) for name in needed):
        return cast(TurnEventStore, store)
    return None


def run_name(turn_id: str, started_at_ms: int) -> str:
    """The name of one run of a turn id: its batches are stored under it, so a rerun of
    the id (after a run that committed nothing) never meets an earlier run's events."""
    return f"{turn_id}@{started_at_ms}"


class BatchWriter:
    """Writes one running turn's log to the store. An `eager` writer writes as events come:
    while one write is in flight, and for `BATCH_SECONDS` after it, the next events
    accumulate and go in the next batch; the terminal event goes at once, in the `final`
    batch. A writer that is not eager writes when asked (`snapshot`) and when the turn ends,
    then all it has not written in one final batch (until it is made eager: someone
    elsewhere reads the turn live). A
    write the store refuses stops the writing (watchers elsewhere then see the turn as
    interrupted once its lease is gone)."""

    def __init__(
        self,
        port: TurnEventStore,
        key: TurnKey,
        codec: BatchCodec,
        events: MemoryEventLog,
        limits: Limits,
        track: Track,
        *,
        eager: bool = True,
        retention: float = RETENTION_SECONDS,
    ) -> None:
        self.eager = eager
        self._retention = retention
        """How long the final batch is kept: the retention of this process's ended logs."""
        self._port = port
        self._key = key
        self._codec = codec
        self._events = events
        self._limits = limits
        self._track = track
        self.written = 0
        self.writes = 0
        self.bytes = 0
        self._task: asyncio.Task[object] | None = None
        self._failed = False
        self._spacing: asyncio.Future[None] | None = None
        """Resolved when the spacing after a write ends: at its time, or at the terminal
        event."""

    def poke(self) -> None:
        """New events were appended: write them unless a write is in flight (or its
        spacing runs)."""
        if self._events.terminal:
            _resolve(self._spacing)
        elif not self.eager:
            return
        if self._failed or (self._task is not None and not self._task.done()):
            return
        if self._events.last > self.written:
            self._task = self._track(self._write())

    def snapshot(self) -> None:
        """Write the events so far now, eager or not (a reattach elsewhere is likely)."""
        if self._failed or (self._task is not None and not self._task.done()):
            return
        if self._events.last > self.written:
            self._task = self._track(self._write())

    async def write_now(self) -> None:
        """Write the events not written yet in this task (no write may be in flight)."""
        if not self._failed and self._events.last > self.written:
            await self._write()

    async def flush(self) -> None:
        """Write what is left (the final batch) and wait for it."""
        self.poke()
        while self._task is not None and not self._task.done():
            await asyncio.wait((self._task,))
            self.poke()

    async def _write(self) -> None:
        once = True  # a writer that is not eager goes on only with the final batch
        while not self._failed and self._events.last > self.written:
            if not (once or self.eager or self._events.terminal):
                return
            once = False
            first, last = self.written + 1, self._events.last
            final = self._events.terminal
            body = self._codec.encode(first, self._events.between(self.written, last))
            keep = self._retention if final else self._limits.turn_timeout + self._retention
            batch = EventBatch(first, last, body, final)
            try:
                stored = await self._port.append_events(
                    self._key, batch, expires_at_ms=now_ms() + int(keep * 1000)
                )
            except Exception as exc:
                log.warning("storing a turn's events failed: %s", type(exc).__name__)
                self._failed = True
                return
            if not stored:
                log.warning("the store refused a batch of a turn's events")
                self._failed = True
                return
            self.written = last
            self.writes += 1
            self.bytes += len(body)
            if not final and not self._events.terminal:
                await self._space()

    async def _space(self) -> None:
        """Wait `BATCH_SECONDS`, or until the terminal event comes (one future and one
        timer: cheaper than a task per batch)."""
        loop = asyncio.get_running_loop()
        spacing: asyncio.Future[None] = loop.create_future()
        self._spacing = spacing
        timer = loop.call_later(BATCH_SECONDS, _resolve, spacing)
        try:
            await spacing
        finally:
            timer.cancel()
            self._spacing = None


def _resolve(future: asyncio.Future[None] | None) -> None:
    if future is not None and not future.done():
        future.set_result(None)


async def expire_all(port: TurnEventStore) -> None:
    """Drop everything expired: calls again (letting the loop run between calls) while a
    call stopped at its limit."""
    while True:
        try:
            dropped = await port.expire(now_ms())
        except Exception as exc:
            log.warning("expiring stored turn events failed: %s", type(exc).__name__)
            return
        if dropped < EXPIRE_LIMIT:
            return
        await asyncio.sleep(0)


class TurnBus:
    """The live-turn port of the store, as this process uses it."""

    def __init__(
        self,
        port: TurnEventStore | None,
        holder: str,
        limits: Limits,
        sealer: ResponseSealer,
    ) -> None:
        self.port: TurnEventStore | None = None if port is None else GuardedPort(port)
        """The port; its store errors are ServiceErrors (STORE_UNAVAILABLE, ...)."""
        self.holder = holder
        self._limits = limits
        self._sealer = sealer
        self._sweeper: asyncio.Task[None] | None = None

    def codec(self, session_id: str, name: str, *, client_held: bool) -> BatchCodec:
        """The batch codec of one run of a turn."""
        return BatchCodec(session_id, name, self._sealer if client_held else None)

    def sweep(self) -> None:
        """Start this process's periodic expiry sweep (once)."""
        if self.port is None or self._sweeper is not None:
            return
        self._sweeper = asyncio.get_running_loop().create_task(
            self._sweep(self.port), context=contextvars.Context()
        )

    async def _sweep(self, port: TurnEventStore) -> None:
        while True:
            await expire_all(port)
            await asyncio.sleep(SWEEP_SECONDS)

    async def signal(self, holder: str, kind: SignalKind, key: TurnKey) -> None:
        """Ask the process `holder` to cancel or publish its turn `key`."""
        if self.port is None:
            return
        expires = now_ms() + int(self._limits.lease_ttl * 1000)
        await self.port.send_signal(TurnSignal(holder, kind, key), expires_at_ms=expires)

    async def take(self, handle: Callable[[TurnSignal], None], running: Callable[[], bool]) -> None:
        """Take this process's signals and `handle` each, every `SIGNAL_POLL_SECONDS` while
        `running()` holds. The first look comes one interval after the start: a signal is
        sent only once its sender saw a turn's lease, so none waits longer than before,
        and turns shorter than the interval (most deterministic ones) cost no query."""
        port = self.port
        if port is None:
            return
        while True:
            await asyncio.sleep(SIGNAL_POLL_SECONDS)
            if not running():
                return
            try:
                for signal in await port.take_signals(self.holder):
                    handle(signal)
            except Exception as exc:
                log.warning("taking turn signals failed: %s", type(exc).__name__)

    async def close(self) -> None:
        """Stop the sweep."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
