"""Watching a session: its stored changes and every turn it runs, whoever started it.

A watch sends the session as it is now, then loops: it reads the session record again
each time the store says it may have changed (`session_topic`, woken by every create, save
and delete of the record from any process of the deployment) and sends what changed:

- the turns that finished since the last read and were not followed live (a turn that
  started and ended between two wake-ups), in the order they finished, each from its
  first event while its events are still kept (`watch_turn` gives them, or the turn's
  recorded outcome once they are not);
- the session, whenever its cursor moved (a claimed or released lease, a commit, a
  truncation); changes stored between two reads arrive as the one session after them;
- the running turn, when the record holds a live lease of a turn not followed yet: its
  events from the first, live, until its terminal event; the session after it follows
  at the next read.

Turns are followed one after the other, in the order they ran; a watch that starts while
a turn runs gets that turn from its first event. A turn the watch could not have at all
(cancelled before it was read, or no longer retained) shows only as the session that
follows it: a renderer that sees a cursor it did not expect reloads the history
(`GetSession`). `after_cursor` works the same way: the watch begins with the session as it
is now, and a cursor past the caller's says the caller missed changes.

A server that drains ends its watches (UNAVAILABLE / SHUTTING_DOWN) at their next wake-up,
a heartbeat's time at most, and refuses new ones: the client watches again elsewhere.

After `heartbeat` seconds without sending anything, a watch sends a heartbeat (also while
a followed turn is silent), so idle streams survive proxies that close silent ones.

Bounds: a watch holds its position in one turn's events at a time (the events themselves
are the turn's, bounded by the turn's log). A watch whose client does not take an event
for `behind` seconds lets go of the turn's events at once and ends, when its client reads
again, with ABORTED / WATCH_BEHIND, metadata `cursor` the last session cursor it sent: so
a slow watcher never keeps a turn's events beyond their retention. The same status ends
a watch whose turn's events were dropped before it read them. The number of watches is
bounded per session and per tenant (`Watchers`).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Final, TypeVar

from agentskit_chat.conversation import Lease, SessionRecord

from ._errors import Reason, ServiceError
from ._records import Loaded, now_ms
from ._types import SessionView, TurnEvent

HEARTBEAT_SECONDS: Final = 15.0
"""Silence after which a watch sends a heartbeat."""
BEHIND_SECONDS: Final = 30.0
"""How long a watch's client may leave one event of a turn untaken before the watch lets go
of the turn and ends with WATCH_BEHIND."""
POLL_SECONDS: Final = 1.0
"""How often a watch reads the session over a store that cannot wake it."""
MAX_FOLLOWED: Final = 64
"""Followed runs of turns a watch remembers (a session retains at most 64 finished turns)."""


@dataclass(frozen=True, slots=True)
class WatchSettings:
    """How often a watch says it is alive, and how far behind it may fall."""

    heartbeat: float = HEARTBEAT_SECONDS
    behind: float = BEHIND_SECONDS

    def __post_init__(self) -> None:
        if self.heartbeat <= 0 or self.behind <= 0:
            raise ValueError("the watch heartbeat and behind bound must be positive")


@dataclass(frozen=True, slots=True)
class WatchedEvent:
    """One event of a turn of the watched session, numbered as the turn numbered it."""

    turn_id: str
    sequence: int
    event: TurnEvent


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Nothing happened for a while."""

    time_ms: int


WatchItem = SessionView | WatchedEvent | Heartbeat
"""What a session watch sends."""

TurnEvents = Callable[[Loaded, str, int], AsyncGenerator[tuple[int, TurnEvent], None]]
"""(sequence, event) of a turn of the session `Loaded` read after a sequence (see
`TurnWatch.events`); counts no watcher of its own."""
Wait = Callable[[Collection[str], float], Awaitable[None]]
"""The store's `wait(topics, timeout)`."""


def shutting_down() -> ServiceError:
    """The error that ends (or refuses) a watch on a server that drains."""
    return ServiceError(
        Reason.SHUTTING_DOWN, "the server is shutting down; watch again on another server"
    )


_Item = TypeVar("_Item", SessionView, Heartbeat)

_RunKey = tuple[str, int | None]
"""One run of a turn: its id and when its lease was claimed (a cancelled id may run again)."""


def _run_key(turn_id: str, started_at_ms: int | None) -> _RunKey:
    return (turn_id, started_at_ms)


class SessionWatch:
    """One watch of one session; `items()` is its stream."""

    def __init__(
        self,
        first: Loaded,
        *,
        load: Callable[[], Awaitable[Loaded]],
        view: Callable[[Loaded], SessionView],
        turn_events: TurnEvents,
        wait: Wait,
        topic: str,
        settings: WatchSettings,
        follow_seconds: float,
        draining: Callable[[], bool] = lambda: False,
    ) -> None:
        self._first = first
        self._load = load
        self._view = view
        self._turn_events = turn_events
        self._follow_seconds = follow_seconds
        """The longest a watch may take to follow one turn: a turn runs no longer than its
        lease lasts, so a watch that needs more has fallen behind it."""
        self._wait = wait
        self._draining = draining
        self._topics = (topic,)
        self._settings = settings
        self._loop = asyncio.get_running_loop()
        self._session_id = first.record.session_id
        self._cursor = -1
        """The cursor of the last session sent."""
        self._last_sent = self._loop.time()
        self._finished: set[_RunKey] = _finished(first.record)
        """Finished turns of the last record read: those the watch started after, and
        those it has sent."""
        self._followed: OrderedDict[_RunKey, None] = OrderedDict()
        """Runs followed live (their finished record is then not sent again)."""
        self._letting_go: asyncio.Task[None] | None = None

    async def items(self) -> AsyncGenerator[WatchItem, None]:
        """The session now, then its turns and changes as they happen; see the module."""
        loaded = self._first
        yield self._sent_view(loaded)
        waiter: asyncio.Future[None] | None = None
        try:
            while True:
                if self._draining():
                    raise shutting_down()
                waiter = await self._armed()
                loaded = await self._reload()
                async for item in self._news(loaded):
                    yield item
                if self._loop.time() - self._last_sent >= self._settings.heartbeat:
                    yield self._sent(Heartbeat(now_ms()))
                await waiter
        finally:
            if waiter is not None and not waiter.done():
                waiter.cancel()

    async def _reload(self) -> Loaded:
        """The record now; SESSION_NOT_FOUND once the watched session is gone (deleted, or
        deleted and created again under its id)."""
        loaded = await self._load()
        if loaded.incarnation != self._first.incarnation:
            raise ServiceError(Reason.SESSION_NOT_FOUND, "no session has this id")
        return loaded

    async def _armed(self) -> asyncio.Future[None]:
        """A wait for the next change of the session, registered before the record is read:
        a change stored after the read wakes it."""
        remaining = self._last_sent + self._settings.heartbeat - self._loop.time()
        waiter = asyncio.ensure_future(self._wait(self._topics, max(remaining, 0.001)))
        await asyncio.sleep(0)  # Its first step registers it.
        return waiter

    async def _news(self, loaded: Loaded) -> AsyncGenerator[WatchItem, None]:
        """What changed since the last read of the record: finished turns not yet sent, the
        session when its cursor moved, then the running turn when it is new."""
        record = loaded.record
        for turn in record.recent_turns:
            key = _run_key(turn.turn_id, turn.started_at_ms)
            if key in self._finished or key in self._followed:
                continue
            self._finished.add(key)
            async for item in self._follow(loaded, turn.turn_id):
                yield item
        self._finished = _finished(record)
        if record.cursor != self._cursor:
            yield self._sent_view(loaded)
        lease = _live_lease(record)
        if lease is not None:
            key = _run_key(lease.turn_id, lease.started_at_ms)
            if key not in self._followed:
                self._followed[key] = None
                if len(self._followed) > MAX_FOLLOWED:
                    self._followed.popitem(last=False)
                async for item in self._follow(loaded, lease.turn_id):
                    yield item

    async def _follow(self, loaded: Loaded, turn_id: str) -> AsyncGenerator[WatchItem, None]:
        """The events of turn `turn_id` (of `loaded`) from its first to its terminal one,
        with heartbeats while it is silent. A turn the session no longer has gives nothing."""
        last = 0
        until = self._loop.time() + self._follow_seconds
        while True:
            try:
                async for item in self._events(loaded, turn_id, last, until):
                    last = item.sequence
                    yield item
                return
            except _SilentError:  # The reader was closed: open another after the last event.
                yield self._sent(Heartbeat(now_ms()))
                loaded = await self._reload()
            except ServiceError as error:
                if error.reason == Reason.TURN_NOT_FOUND:
                    return  # Cancelled or gone before it was read: the session says it.
                if error.reason == Reason.WATCH_BEHIND:
                    raise self.behind() from None
                raise

    async def _events(
        self, loaded: Loaded, turn_id: str, after: int, until: float
    ) -> AsyncGenerator[WatchedEvent, None]:
        """The turn's events after `after`. Raises _SilentError (the reader closed) after a
        heartbeat's silence, and WATCH_BEHIND (the reader let go) when the client leaves an
        event untaken for `behind` seconds or past `until` (loop time)."""
        reader = self._turn_events(loaded, turn_id, after)
        loop = self._loop
        settings = self._settings
        timer: asyncio.TimerHandle | None = None
        try:
            while True:
                timeout = asyncio.timeout_at(self._last_sent + settings.heartbeat)
                try:
                    async with timeout:
                        sequence, event = await anext(reader)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    if timeout.expired():
                        raise _SilentError from None
                    raise
                at = min(loop.time() + settings.behind, until)
                timer = loop.call_at(at, self._let_go, reader)
                yield WatchedEvent(turn_id, sequence, event)
                timer.cancel()
                self._last_sent = loop.time()
                if self._letting_go is not None:
                    raise self.behind()
        finally:
            if timer is not None:
                timer.cancel()
            if self._letting_go is not None:
                await asyncio.shield(self._letting_go)
            else:
                await reader.aclose()

    def _let_go(self, reader: AsyncGenerator[tuple[int, TurnEvent], None]) -> None:
        """The client left an event untaken too long: close the turn's reader now (it is
        suspended while the watch waits for its client), so the watch holds nothing of it."""
        self._letting_go = asyncio.ensure_future(reader.aclose())

    def behind(self) -> ServiceError:
        """The error that ends a watch that fell behind."""
        return ServiceError(
            Reason.WATCH_BEHIND,
            "the watch fell behind the session's turns; watch again after the cursor",
            cursor=max(self._cursor, 0),
        )

    def _sent_view(self, loaded: Loaded) -> SessionView:
        self._cursor = loaded.record.cursor
        return self._sent(self._view(loaded))

    def _sent(self, item: _Item) -> _Item:
        self._last_sent = self._loop.time()
        return item


class _SilentError(Exception):
    """A followed turn sent nothing for a heartbeat's time; its reader was closed."""


def _finished(record: SessionRecord) -> set[_RunKey]:
    return {_run_key(t.turn_id, t.started_at_ms) for t in record.recent_turns}


def _live_lease(record: SessionRecord) -> Lease | None:
    lease = record.lease
    if lease is None or lease.expires_at_ms <= time.time_ns() // 1_000_000:
        return None
    return lease
