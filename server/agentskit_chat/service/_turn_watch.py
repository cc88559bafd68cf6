"""Following a turn after a sequence: from this process's log of it, else from the store.

Watching never starts, changes or extends a turn. The stream ends after the terminal
event. Where the events come from:

- this process runs (or ran, less than the retention ago) the turn: its log;
- another process runs it: the store's batches, waking on `turn_topic`; when nothing of it
  is stored yet (a turn whose stream cancels it writes nothing unless asked) the holder is
  sent a PUBLISH signal. The session record is read again whenever a wait brings nothing:
  a run whose lease lapsed or was released without its final batch ends with the
  `interrupted` failed event;
- the turn ended on another process: the store's batches, which every run writes when it
  ends (its final batch follows its record by a moment: a watcher waits for it up to
  `FINAL_GRACE_SECONDS`), kept for the retention after the end;
- the turn finished and its events are no longer kept: its recorded outcome, as a repeated
  turn id streams it, numbered from `after_sequence` + 1.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Final

from agentskit_chat.conversation import SealedResponseError, SessionRecord
from agentskit_chat.storage import HistoryMode
from agentskit_chat.storage._turn_events import SignalKind, TurnEventStore, TurnKey, turn_topic

from ._errors import Reason, ServiceError, invalid
from ._event_log import MemoryEventLog
from ._live_turns import LiveTurns
from ._records import Loaded, Records, now_ms
from ._terminal import INTERRUPTED, failure, repeat
from ._turn_bus import BATCH_SECONDS, TurnBus, run_name
from ._types import TurnEvent

WAIT_SECONDS: Final = 1.0
"""Longest wait for a stored turn's next events before its record is read again."""
NEXT_BATCH_SECONDS: Final = BATCH_SECONDS
"""Longest wait for the next batch after a read that brought events. The turn's next write
wakes the watcher; one written while the watcher handed its events on woke nobody (a
wake-up finds only those who wait) and is read after this time, no later than the writer's
spacing would have brought it. A read at once after each batch instead would find nothing
nearly always: one read per batch rather than two."""
FINAL_GRACE_SECONDS: Final = 5.0
"""How long a watcher waits for the final batch of a turn recorded as finished before it
answers with the recorded outcome instead."""
FINAL_GRACE_MS: Final = int(FINAL_GRACE_SECONDS * 1000)


@dataclass(frozen=True, slots=True)
class _Run:
    """The run of the turn id the session record names."""

    name: str | None
    """Its run name; None when the record names no run of the turn."""
    running: bool
    """Its lease is live."""
    holder: str | None = None
    finished: bool = False
    finished_at_ms: int = 0


def _run_of(record: SessionRecord, turn_id: str, at_ms: int) -> _Run:
    lease = record.lease
    if lease is not None and lease.turn_id == turn_id and record.find_turn(turn_id) is None:
        name = run_name(turn_id, lease.started_at_ms or 0)
        return _Run(name, lease.expires_at_ms > at_ms, lease.holder)
    finished = record.find_turn(turn_id)
    if finished is not None:
        name = run_name(turn_id, finished.started_at_ms or 0)
        return _Run(name, False, finished=True, finished_at_ms=finished.finished_at_ms)
    return _Run(None, False)


class TurnWatch:
    """Streams of turns after a sequence, for `ChatService.watch_turn`."""

    def __init__(self, records: Records, live: LiveTurns, bus: TurnBus) -> None:
        self._records = records
        self._live = live
        self._bus = bus

    def events(
        self, loaded: Loaded, turn_id: str, after: int
    ) -> AsyncGenerator[tuple[int, TurnEvent], None]:
        """(sequence, event) of the turn `turn_id` of `loaded`'s session after `after`;
        `loaded` was just read. The stream of the source itself (no generator in between:
        each one costs every event a step); TURN_NOT_FOUND when there is none (at once
        when the record names no run and the store keeps no ended one: at the first step)."""
        session_id = loaded.record.session_id
        run = _run_of(loaded.record, turn_id, now_ms())
        local = self._live.logs.find((loaded.tenant, session_id, turn_id))
        if local is not None and (run.name is None or local.name == run.name):
            return _read(local, after)
        if run.name is None:
            return self._ended(loaded, turn_id, after)
        return self._stored(loaded, turn_id, run, after)

    async def _ended(
        self, loaded: Loaded, turn_id: str, after: int
    ) -> AsyncGenerator[tuple[int, TurnEvent], None]:
        """The turn's newest stored run when its final batch is kept: a run that ended
        recording nothing (cancelled, or interrupted by a drain) leaves the record naming no
        run, and only the store knows its end."""
        port = self._bus.port
        session_id = loaded.record.session_id
        name = None if port is None else await port.newest_run(loaded.tenant, session_id, turn_id)
        if port is None or name is None:
            raise ServiceError(Reason.TURN_NOT_FOUND, "the session retains no turn with this id")
        key = TurnKey(loaded.tenant, session_id, name)
        batches = await port.read_events(key, now_ms=now_ms())
        if not batches or not batches[-1].final:
            raise ServiceError(Reason.TURN_NOT_FOUND, "the session retains no turn with this id")
        if after > batches[-1].last:
            raise invalid("after_sequence", "after_sequence is past the turn's last event")
        if after == batches[-1].last:
            return
        async with aclosing(self._stored(loaded, turn_id, _Run(name, False), after)) as events:
            async for item in events:
                yield item

    async def _stored(
        self, loaded: Loaded, turn_id: str, run: _Run, after: int
    ) -> AsyncGenerator[tuple[int, TurnEvent], None]:
        port = self._bus.port
        session_id = loaded.record.session_id
        assert run.name is not None
        key = TurnKey(loaded.tenant, session_id, run.name)
        codec = self._bus.codec(
            session_id, run.name, client_held=loaded.history_mode == HistoryMode.CLIENT
        )
        position = after
        asked = False
        stored = False
        final_wait: float | None = None
        looked_behind = False
        loop = asyncio.get_running_loop()
        checked: float | None = None
        """When the record was last read: wake-ups that bring nothing (another process's
        write to anything wakes every waiter on SQLite) read it again at most every
        WAIT_SECONDS."""
        first: Loaded | None = loaded
        """The record the watch began with: when it says the run is running, the first look
        takes its word (at worst the run ended since, and the next look, WAIT_SECONDS later,
        sees it) rather than reading it again at once."""
        while True:
            fresh = False
            if port is not None:
                for batch in await port.read_events(key, position, now_ms=now_ms()):
                    stored = True
                    if batch.final and batch.last < after:
                        raise invalid(
                            "after_sequence", "after_sequence is past the turn's last event"
                        )
                    if batch.last > position:
                        try:
                            decoded = codec.decode(batch.first, batch.body)
                        except (ValueError, SealedResponseError):
                            raise ServiceError(
                                Reason.SESSION_CORRUPT,
                                "the stored events of the turn are unusable",
                                code="turn_events_corrupt",
                            ) from None
                        for offset, event in enumerate(decoded):
                            sequence = batch.first + offset
                            if sequence > position:
                                position = sequence
                                fresh = True
                                yield sequence, event
                    if batch.final:
                        return
            if fresh:
                await _wait(port, key, NEXT_BATCH_SECONDS)
                continue
            since = None if checked is None else loop.time() - checked
            if since is not None and since < WAIT_SECONDS:
                await _wait(port, key, WAIT_SECONDS - since)
                continue
            checked = loop.time()
            # Nothing new: what does the record say of this run now?
            now = None if first is None else _run_of(first.record, turn_id, now_ms())
            first = None
            if now is None or not now.running:
                loaded = await self._records.load(session_id)
                now = _run_of(loaded.record, turn_id, now_ms())
            if now.name == run.name and now.running:
                if now.holder == self._bus.holder:
                    log = self._live.logs.find((loaded.tenant, session_id, turn_id))
                    if log is not None and log.name == run.name:
                        async with aclosing(_read(log, position)) as events:
                            async for item in events:
                                yield item
                        return
                elif not asked and now.holder is not None:
                    asked = True
                    await self._bus.signal(now.holder, SignalKind.PUBLISH, key)
                await _wait(port, key)
                continue
            if not looked_behind and port is not None and position > 0:
                # Once the run no longer runs: did its final batch end at `position`?
                looked_behind = True
                behind = await port.read_events(key, position - 1, now_ms=now_ms())
                if any(batch.final and batch.last == position for batch in behind):
                    return  # the caller has the terminal event
                if not behind:  # rare: is `position` past the stored end of the run?
                    behind = await port.read_events(key, now_ms=now_ms())
                    if any(batch.final and batch.last < position for batch in behind):
                        raise invalid(
                            "after_sequence", "after_sequence is past the turn's last event"
                        )
                stored = stored or bool(behind)
            lapsed = now.name == run.name and not now.finished  # its holder stopped
            # A run recorded as finished a while ago wrote its final batch long since (or
            # that batch expired before the earlier ones): nothing more is coming.
            # So has one whose final batch, written at its end, would have expired by now.
            elapsed = now_ms() - now.finished_at_ms
            retention_ms = int(self._live.logs.retention * 1000)
            settled = now.finished and (elapsed > FINAL_GRACE_MS or elapsed >= retention_ms)
            if not lapsed and not settled:  # the holder may still write its end
                if final_wait is None:
                    final_wait = loop.time() + FINAL_GRACE_SECONDS
                # Every run that ends writes its final batch: a run recorded as finished
                # just now (its end is written after its record) soon has it.
                coming = stored or now.finished or asked
                if coming and loop.time() < final_wait:
                    await _wait(port, key)  # its final batch may be on its way
                    continue
            if now.name == run.name and now.finished:
                async with aclosing(self._recorded(session_id, turn_id, position)) as events:
                    async for item in events:
                        yield item
                return
            # The run's lease lapsed, or was released, and the run recorded nothing.
            yield position + 1, failure(INTERRUPTED)
            return

    async def _recorded(
        self, session_id: str, turn_id: str, after: int
    ) -> AsyncGenerator[tuple[int, TurnEvent], None]:
        loaded, history = await self._records.load_with_messages(session_id)
        finished = loaded.record.find_turn(turn_id)
        if finished is None:
            raise ServiceError(Reason.TURN_NOT_FOUND, "the session retains no turn with this id")
        sequence = after
        async with aclosing(repeat(loaded, history, finished)) as events:
            async for event in events:
                sequence += 1
                yield sequence, event


async def _read(log: MemoryEventLog, after: int) -> AsyncGenerator[tuple[int, TurnEvent], None]:
    if after > log.last:
        raise invalid("after_sequence", "after_sequence is past the turn's last event")
    async with aclosing(log.read(after)) as events:
        async for item in events:
            yield item


async def _wait(port: TurnEventStore | None, key: TurnKey, timeout: float = WAIT_SECONDS) -> None:
    if port is None:
        await asyncio.sleep(timeout)
    else:
        await port.wait((turn_topic(key),), timeout)
