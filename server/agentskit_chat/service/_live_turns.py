"""Turns that run in a task of their own, publishing into their event log.

The stream that starts a turn is the log's first reader, from the start. A cancelling turn
(below) runs in its stream's task until it claims the lease: one that ends without it (an
answer committed with one write, a repeat, a refusal) never needs a task, and its events go
to the stream as they went to the log (kept for watchers when it committed). It runs in a
context of its own all the same, so what it makes current (its span) stays in it, and the
task a turn that claims the lease goes on in has that context too. What the stream's end
does to the turn is the request's `on_disconnect`:

- CANCEL (the default): the stream paces the turn: past `PACE_EVENTS` events or
  `PACE_BYTES` that the stream has not asked past, the turn waits until the stream asks for
  the next event (so a client that stops reading stops the model stream, as the stream's
  flow control did when the turn ran inside it). Closing it cancels the turn: the lease is
  released and nothing more is committed; the close returns once the turn ended.
- CONTINUE: the turn runs to its end without pacing (its log's bound and the turn timeout
  bound it) and commits. Once its stream is closed before the end, the turn writes its
  events so far to the store, and the rest when it ends, so a reattach on any process
  finds them (`TurnBus`);
  while the stream reads, nothing is written but what every turn writes.

Every turn that claimed (its log is kept) writes its events to the store when it ends, in
one final batch (or what its writer had not written yet): a reattach on any process during
the retention gets them, as one here gets them from the kept log.

Once a turn claims its lease its log is kept (`EventLogs`) where watchers of this process
find it, and the turn can be stopped (`stop`): cancelled by CancelTurn or a CANCEL signal,
or interrupted when the service closes. A stopped turn's log ends with a failed event
("cancelled", or "interrupted" when the process drains or closes), written to the store as
well when it publishes there, so every stream of it ends.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from typing import Final

from agentskit_chat.storage._turn_events import SignalKind, TurnKey, TurnSignal

from ._event_log import (
    EVENT_BYTES,
    MAX_EVENTS,
    EventLogs,
    LogFullError,
    LogKey,
    MemoryEventLog,
    stamped,
)
from ._in_context import run_in
from ._limits import Limits
from ._tenancy import current_principal
from ._terminal import CANCELLED, INTERRUPTED, OUTPUT_LIMIT, failure
from ._turn_bus import BatchWriter, Track, TurnBus, run_name
from ._types import Claim, DisconnectMode, TurnEvent, TurnRequest

log = logging.getLogger(__name__)

PACE_EVENTS: Final = 8
"""Events a turn may run ahead of the stream that started it."""
PACE_BYTES: Final = 16 * 1024
"""Bytes (as its log counts them) a turn may run ahead of the stream that started it: a
larger event waits until the stream asks for the next one, as when the turn ran inside the
stream."""
TEXT_SLACK: Final = 64 * 1024
"""Bytes a log holds beyond twice the output limit (the deltas and the answer) and
`EVENT_BYTES` for each of its events."""

Run = Callable[[Callable[[Claim], None]], AsyncGenerator[TurnEvent, None]]
"""Starts a turn's events; the turn calls its argument once it claimed the lease."""


class LiveTurn:
    """One turn of this process, from its start to its end."""

    def __init__(self, key: LogKey, log: MemoryEventLog, continued: bool) -> None:
        self.key = key
        self.log = log
        self.continued = continued
        self.claim: Claim | None = None
        self.task: asyncio.Future[None] | None = None
        self.stop_code: str | None = None
        self.writer: BatchWriter | None = None
        self.detached = False
        """A continued turn's stream was closed before its end."""

    @property
    def store_key(self) -> TurnKey | None:
        """Where this run's events are stored, once it claimed the lease."""
        if self.claim is None:
            return None
        tenant, session_id, turn_id = self.key
        return TurnKey(tenant, session_id, run_name(turn_id, self.claim.started_at_ms))


class LiveTurns:
    """Starts turns in tasks of their own; each publishes into a log kept in `logs`."""

    def __init__(
        self, limits: Limits, bus: TurnBus | None = None, track: Track | None = None
    ) -> None:
        self._limits = limits
        self.logs = EventLogs()
        self.bus = bus
        self._track: Track = track or asyncio.ensure_future
        self._running: dict[LogKey, LiveTurn] = {}
        self._by_store_key: dict[TurnKey, LiveTurn] = {}
        self._detached: set[asyncio.Future[None]] = set()
        self._signals: asyncio.Future[None] | None = None
        self.draining = False
        """Turns cut off from now on end as interrupted rather than cancelled."""

    def start(self, request: TurnRequest, run: Run) -> AsyncGenerator[tuple[int, TurnEvent], None]:
        """(sequence, event) for each event of the turn `run` starts (of `request`), read
        from its log. The turn starts at the first step of the returned stream, in a copy of
        the caller's context (its principal and its span): a stream closed before it started
        runs nothing. A continued turn runs in a task of its own from the start; a cancelling
        one once it claims the lease (see `_inline`)."""
        key = (current_principal().tenant, request.session_id, request.turn_id)
        max_bytes = 2 * self._limits.max_output_bytes + (MAX_EVENTS + 1) * EVENT_BYTES + TEXT_SLACK
        live = LiveTurn(
            key, MemoryEventLog(max_bytes), request.on_disconnect == DisconnectMode.CONTINUE
        )

        def publish() -> asyncio.Future[None]:
            task = asyncio.ensure_future(self._publish(live, run(lambda c: self._claimed(live, c))))
            live.task = task
            return task

        if live.continued:
            return self._detach(live, publish)
        return self._inline(live, run)

    def running(self, key: LogKey) -> LiveTurn | None:
        """The turn `key` while it runs here, once it claimed its lease."""
        return self._running.get(key)

    async def stop(self, live: LiveTurn, code: str = CANCELLED) -> bool:
        """Stop a running turn (its streams end with the failed event of `code`) and
        return once it ended: its lease is released then. False, changing nothing, when
        the turn already has its terminal event (it ended on its own; what is left is its
        bookkeeping)."""
        task = live.task
        if task is None or live.log.terminal:
            return False
        if live.stop_code is None:
            live.stop_code = code
        if not task.done():
            task.cancel()
        await asyncio.wait((task,))
        return True

    async def interrupt_all(self) -> None:
        """Stop every turn still running (the process is closing)."""
        turns = list(self._running.values())
        await asyncio.gather(*(self.stop(live, INTERRUPTED) for live in turns))
        for task in list(self._detached):
            task.cancel()
        if self._detached:
            await asyncio.wait(set(self._detached))
        if self._signals is not None:
            self._signals.cancel()
            await asyncio.wait((self._signals,))

    async def _detach(
        self, live: LiveTurn, publish: Callable[[], asyncio.Future[None]]
    ) -> AsyncGenerator[tuple[int, TurnEvent], None]:
        """The stream of a continued turn: closing it leaves the turn running. While the
        stream reads, nobody needs the turn's events in the store; once it is closed before
        it took the terminal event, those so far go there at once and the rest when the
        turn ends (or as they come, once a watcher on another process asks), for a
        reattach on any process."""
        task = publish()
        self._detached.add(task)
        task.add_done_callback(self._detached.discard)
        read = False
        try:
            async with aclosing(live.log.read()) as events:
                async for item in events:
                    yield item
            read = True
        finally:
            if not read:
                live.detached = True
                self._publish_to_store(live, eager=False)

    async def _inline(
        self, live: LiveTurn, run: Run
    ) -> AsyncGenerator[tuple[int, TurnEvent], None]:
        """The stream of a cancelling turn, which runs in the stream's task (in a context of
        its own, as a task's) until it either claims the lease or ends. A turn that ends
        without one (a repeat, a refusal, an answer committed with one write) needs nothing
        more: its events go to its log (kept for watchers when it committed) and to the
        stream. One that claims the lease goes on in a task of its own, in the same context,
        from the event it reached: the stream then reads its log."""
        context = contextvars.copy_context()
        log = live.log
        events = run(lambda c: self._claimed(live, c))
        reached: list[TurnEvent] = []
        try:
            while True:
                try:
                    event = await run_in(context, anext(events))
                except StopAsyncIteration:
                    break
                reached.append(stamped(event))  # its time: the one every view sends
                claim = live.claim
                if claim is not None and claim.leased:
                    break
        except BaseException as error:
            await run_in(context, events.aclose())
            self._inline_ended(live, reached, error)
            raise
        claim = live.claim
        if claim is None or not claim.leased:
            self._inline_ended(live, reached, None)
            try:
                for sequence, event in enumerate(reached, 1):
                    yield sequence, event
            finally:
                if claim is not None:
                    await self._store_end(live)
            return
        task = asyncio.get_running_loop().create_task(
            self._publish(live, events, reached), context=context
        )
        live.task = task
        async with aclosing(log.read(publish=lambda: task)) as stream:
            async for item in stream:
                yield item

    def _inline_ended(
        self, live: LiveTurn, events: list[TurnEvent], error: BaseException | None
    ) -> None:
        """A turn that ran inline and took no lease ended with `events` (or `error`)."""
        log = live.log
        if live.claim is not None:
            for event in events:
                log.append(event)
        log.end(error)
        self._ended(live)
        if live.claim is not None:
            self.logs.ended(live.key, keep=error is None)

    async def _store_end(self, live: LiveTurn) -> None:
        """Write the events of a turn that ended inline (and committed) to the store, in its
        stream's task once they went to the stream: a task of its own would cost more."""
        writer = self._writer(live, eager=False)
        if writer is not None:
            await writer.write_now()

    def _claimed(self, live: LiveTurn, claim: Claim) -> None:
        live.claim = claim
        turn_id = live.key[2]
        live.log.name = run_name(turn_id, claim.started_at_ms)
        self.logs.open(live.key, live.log)
        self._running[live.key] = live
        store_key = live.store_key
        if store_key is not None:
            self._by_store_key[store_key] = live
        bus = self.bus
        if bus is None or bus.port is None:
            return
        bus.sweep()
        if live.detached:
            self._publish_to_store(live, eager=False)
        if not claim.leased:
            return  # Committed already: no lease another process could ask about.
        if self._signals is None or self._signals.done():
            # A context of its own: the loop outlives this turn, and is no part of its span.
            self._signals = asyncio.get_running_loop().create_task(
                bus.take(self._signal, lambda: bool(self._running)), context=contextvars.Context()
            )

    def _publish_to_store(self, live: LiveTurn, *, eager: bool) -> None:
        """Write the turn's events to the store: as they come when `eager`, else all of
        them when the turn ends."""
        writer = self._writer(live, eager=eager)
        if writer is None:
            return
        if eager:
            writer.poke()
        else:
            writer.snapshot()

    def _writer(self, live: LiveTurn, *, eager: bool) -> BatchWriter | None:
        """The turn's writer to the store (made `eager` when asked); None without a store
        or before the turn claimed."""
        bus, key = self.bus, live.store_key
        if bus is None or bus.port is None or key is None:
            return None
        if live.writer is None:
            assert live.claim is not None
            codec = bus.codec(key.session_id, key.turn_id, client_held=live.claim.client_held)
            live.writer = BatchWriter(
                bus.port,
                key,
                codec,
                live.log,
                self._limits,
                self._track,
                eager=eager,
                retention=self.logs.retention,
            )
        live.writer.eager = live.writer.eager or eager
        return live.writer

    def _signal(self, signal: TurnSignal) -> None:
        live = self._by_store_key.get(signal.key)
        if live is None or live.task is None or live.task.done():
            return
        if signal.kind == SignalKind.PUBLISH:
            self._publish_to_store(live, eager=True)
        elif signal.kind == SignalKind.CANCEL:
            self._track(self.stop(live, CANCELLED))

    def _ended(self, live: LiveTurn) -> None:
        if self._running.get(live.key) is live:
            del self._running[live.key]
        store_key = live.store_key
        if store_key is not None and self._by_store_key.get(store_key) is live:
            del self._by_store_key[store_key]

    async def _publish(
        self,
        live: LiveTurn,
        events: AsyncGenerator[TurnEvent, None],
        reached: Sequence[TurnEvent] = (),
    ) -> None:
        """Run the turn of `events` (which already yielded `reached`) to its end, publishing
        its events into its log."""
        log = live.log
        error: BaseException | None = None
        full = False
        try:
            for event in reached:  # What it yielded before its lease: fits the log.
                log.append(event)
            async with aclosing(events) as turn:
                async for event in turn:
                    try:
                        sequence = log.append(event)
                    except LogFullError:
                        full = True  # Leaving closes the turn: nothing more is committed.
                        break
                    if live.writer is not None:
                        live.writer.poke()
                    if live.continued:
                        continue
                    count, size = log.ahead()
                    if count > PACE_EVENTS or size > PACE_BYTES:
                        await log.wait_taken(sequence)
            if full:
                log.append(failure(OUTPUT_LIMIT))
        except asyncio.CancelledError as cancelled:
            # The turn is closed (its lease released). A turn that claimed its lease ends
            # for every stream with a failed event; one that had not just ends.
            if log.terminal:
                pass  # Cancelled after its end: the log ended as it should.
            elif live.claim is None:
                error = cancelled
            else:
                code = live.stop_code or (INTERRUPTED if self.draining else CANCELLED)
                log.append(failure(code))
            raise
        except Exception as exc:  # The readers get it: a refusal before the turn ran.
            error = exc
        finally:
            try:
                if live.claim is not None and error is None:
                    self._publish_to_store(live, eager=False)
                if live.writer is not None:
                    # Before the log ends: its streams end once the end is in the store (so
                    # a caller that then deletes the session deletes the events too).
                    await asyncio.shield(self._track(live.writer.flush()))
            finally:
                log.end(error)
                self._ended(live)
                if live.claim is not None:
                    self.logs.ended(live.key, keep=error is None)
