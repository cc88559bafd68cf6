"""SQLite backend: statements on the event loop, waits and disk syncs on a worker thread.

Durability is chosen with `synchronous` (SYNCHRONOUS_MODES):

- `normal` (the default): a WAL commit does not sync to disk and takes tens of
  microseconds, less than handing work to a thread and back. A committed write survives
  the process being killed (it is in the operating system's cache); after a power loss
  or an operating system crash the database is intact but the last commits before the
  latest checkpoint may be gone.
- `full`: every commit syncs the write-ahead log to disk before it returns, so a committed
  write also survives power loss. Each write then runs on the worker thread, so that the
  sync never blocks the event loop; reads stay on the event loop.

Each port method otherwise first runs on the event loop's own connection, which never
waits for a lock (`busy_timeout` 0). When another connection holds the write lock, the
method runs again on the store's worker thread, whose connection waits up to
`busy_timeout_ms`. Checkpoints (the only disk syncs with `normal`) also run on the worker
thread every CHECKPOINT_EVERY writes: passive ones that never block a writer, and every
RESTART_EVERY-th in RESTART mode so the log starts over (writes arriving meanwhile find the
database busy and queue behind it on the worker thread). The connections and the worker
thread are in `_sqlite_connections.py`, the statements of sessions and messages in
`_sqlite_sessions.py`.

The schema version lives in `PRAGMA user_version`; a database written by a newer version
is refused, one of version 1 (before tenants) is migrated in place, its sessions moving
to the default tenant, one of version 2 gains the tables of live turns, and one of
version 3 gains the messages' tool data (empty for the messages it holds), and one of
version 4 the table of published definitions (`_published.py`). Every key is
(tenant, session id). Any number of stores, in any number of processes, may share one
file: compare-and-set is a conditional `UPDATE` inside a write transaction; given
`expected_record`, the condition compares the stored record with those bytes in place
(SQLite has no hash function of its own, and the bytes need no round trip to compare). The schema
and its migrations are in `_sqlite_schema.py`.

Live turns (`TurnEventStore`): event batches and signals live in tables of their own
(`turn_events`, `turn_signals`); an append checks and writes in one write transaction.
Wake-ups: a write of this store wakes this store's waiters at once. Writes of other
connections (the stores of other worker processes on the same file) are noticed by
reading `PRAGMA data_version` every POLL_INTERVAL seconds, only while at least one `wait`
is pending; a change wakes every waiter, which re-reads. It is read on the connection this
store writes with on the event loop, whose own commits do not change it: a store's own
turns do not wake its waiters twice.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Collection, Sequence
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Final

from . import _sqlite_definitions as published
from . import _sqlite_sessions as sessions
from . import _sqlite_turns as turns
from ._ports import (
    DEFAULT_TENANT,
    HistoryChange,
    SessionExistsError,
    StoredMessage,
    StoredSession,
    StoreUnavailableError,
)
from ._published import FoundDefinition, PublishedDefinition, check_published
from ._sqlite_connections import CHECKPOINT_EVERY as CHECKPOINT_EVERY
from ._sqlite_connections import RESTART_EVERY as RESTART_EVERY
from ._sqlite_connections import Connections, unavailable
from ._sqlite_schema import SCHEMA_VERSION as SCHEMA_VERSION
from ._turn_events import (
    EventBatch,
    TurnKey,
    TurnSignal,
    holder_topic,
    turn_topic,
)
from ._wakeups import Wakeups
from .memory import _check_compare_and_set, check_batch, frozen_batch

SYNCHRONOUS_MODES: Final = ("normal", "full")
"""SQLite's `PRAGMA synchronous` settings a store may use (see the module's docstring)."""
DEFAULT_SYNCHRONOUS: Final = "normal"
DEFAULT_BUSY_TIMEOUT_MS: Final = 5000
POLL_INTERVAL: Final = 0.05
"""Seconds between two looks for other processes' writes, while someone waits."""


class SqliteStore:
    """A `Store` in one SQLite file (WAL journal, `synchronous` NORMAL or FULL, foreign keys).

    Connections are opened, and the schema created or checked, on first use or by
    `open()`; `open_sqlite_store` does both steps. Failures of SQLite, including a busy
    database past `busy_timeout_ms`, raise StoreUnavailableError after rolling back.
    A cancelled call does not abort work the worker thread has already started. Use a
    store from one event loop.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        synchronous: str = DEFAULT_SYNCHRONOUS,
    ) -> None:
        if busy_timeout_ms < 0:
            raise ValueError("busy_timeout_ms must not be negative")
        if synchronous not in SYNCHRONOUS_MODES:
            raise ValueError(f"synchronous must be one of {', '.join(SYNCHRONOUS_MODES)}")
        self._path = Path(path)
        self._synchronous = synchronous
        self._connections = Connections(
            self._path, busy_timeout_ms=busy_timeout_ms, synchronous=synchronous
        )
        self._wakeups = Wakeups()
        self._polling: asyncio.Task[None] | None = None

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @property
    def synchronous(self) -> str:
        """The durability of a commit: `normal` or `full` (SYNCHRONOUS_MODES)."""
        return self._synchronous

    async def open(self) -> None:
        """Open the connections and create or check the schema, if not done yet."""
        if self._connections.writes_on_worker:
            # the worker thread's connection, which migrates the schema
            await self._connections.run("open", _nothing, write=True, counted=False)
        await self._connections.run("open", _nothing)

    async def create(self, session: StoredSession) -> None:
        """Insert a new session; raises SessionExistsError when its tenant has the id."""
        inserted = await self._connections.run(
            "create", partial(sessions.create, session), write=True
        )
        if not inserted:
            raise SessionExistsError("a session with this id already exists")
        self._wakeups.notify_session(session.tenant, session.session_id)

    async def load(self, session_id: str, *, tenant: str = DEFAULT_TENANT) -> StoredSession | None:
        """The tenant's stored session, or None."""
        return await self._connections.run("load", partial(sessions.load, tenant, session_id))

    async def compare_and_set(
        self,
        session: StoredSession,
        *,
        expected_cursor: int,
        history: HistoryChange | None = None,
        expected_record: bytes | None = None,
    ) -> bool:
        """Replace the session if its stored cursor equals `expected_cursor` (and its
        stored bytes `expected_record`, when given: compared in the `UPDATE`'s condition).

        Raises ValueError, writing nothing, when `session.cursor` is not
        `expected_cursor + 1`, when `history.keep` is negative, or when it exceeds the
        stored history's length.
        """
        _check_compare_and_set(session, expected_cursor, history)
        saved = await self._connections.run(
            "compare_and_set",
            partial(sessions.compare_and_set, session, expected_cursor, history, expected_record),
            write=True,
        )
        if saved:
            self._wakeups.notify_session(session.tenant, session.session_id)
        return saved

    async def delete(
        self,
        session_id: str,
        *,
        tenant: str = DEFAULT_TENANT,
        expected_cursor: int | None = None,
    ) -> bool:
        """Remove the tenant's session, its messages and its turns' events; False,
        removing nothing, when it does not exist or its cursor differs from
        `expected_cursor`."""
        delete = partial(sessions.delete, tenant, session_id, expected_cursor)
        deleted = await self._connections.run("delete", delete, write=True)
        if deleted:
            self._wakeups.notify_session(tenant, session_id)
        return deleted

    async def list_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> Sequence[StoredMessage]:
        """The session's messages, oldest first, as a tuple; empty when there are none."""
        return await self._connections.run(
            "list_messages", partial(sessions.list_messages, tenant, session_id)
        )

    async def load_with_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> tuple[StoredSession, tuple[StoredMessage, ...]] | None:
        """The tenant's session and its messages, read in one transaction (one snapshot
        of the write-ahead log); None when missing."""
        read = partial(sessions.load_with_messages, tenant, session_id)
        return await self._connections.run("load_with_messages", read)

    async def append_events(self, key: TurnKey, batch: EventBatch, *, expires_at_ms: int) -> bool:
        """Store `batch`; False, writing nothing, when a stored batch of the turn holds one
        of its sequences or ended the turn, or when `batch` is final and a stored batch
        follows it. ValueError for a batch whose sequences are not 1 <= first <= last."""
        check_batch(batch)
        append = partial(turns.append_events, key, frozen_batch(batch), expires_at_ms)
        appended = await self._connections.run("append_events", append, write=True)
        if appended:
            self._wakeups.notify(turn_topic(key))
        return appended

    async def read_events(
        self, key: TurnKey, after: int = 0, *, now_ms: int = 0
    ) -> tuple[EventBatch, ...]:
        """The turn's stored batches holding a sequence after `after`, in order, but for
        those expired at `now_ms`."""
        return await self._connections.run(
            "read_events", partial(turns.read_events, key, after, now_ms)
        )

    async def newest_run(self, tenant: str, session_id: str, turn_id: str) -> str | None:
        """The name of the newest stored run of `turn_id`, or None."""
        find = partial(turns.newest_run_of, tenant, session_id, turn_id)
        return await self._connections.run("newest_run", find)

    async def send_signal(self, signal: TurnSignal, *, expires_at_ms: int) -> None:
        """Leave `signal` for its holder; a repeated one keeps its place and the later
        of the two expiries."""
        await self._connections.run(
            "send_signal", partial(turns.send_signal, signal, expires_at_ms), write=True
        )
        self._wakeups.notify(holder_topic(signal.holder))

    async def take_signals(self, holder: str) -> tuple[TurnSignal, ...]:
        """Remove and return the signals left for `holder`, oldest first."""
        return await self._connections.run(
            "take_signals", partial(turns.take_signals, holder), write=True
        )

    async def expire(self, now_ms: int) -> int:
        """Drop the batches and signals whose expiry is at or before `now_ms` (at most
        turns.EXPIRE_LIMIT of each per call); how many."""
        return await self._connections.run("expire", partial(turns.expire, now_ms), write=True)

    async def publish_definitions(
        self,
        publisher: str,
        definitions: Sequence[PublishedDefinition],
        *,
        expires_at_ms: int,
        now_ms: int,
    ) -> None:
        """Make `definitions` the publisher's rows until `expires_at_ms`; drop expired rows."""
        check_published(definitions)
        write = partial(published.publish, publisher, tuple(definitions), expires_at_ms, now_ms)
        await self._connections.run("publish_definitions", write, write=True)

    async def published_definition(
        self, definition_id: str, revision: int, *, now_ms: int
    ) -> FoundDefinition | None:
        """The document of a revision some unexpired row names, or None."""
        read = partial(published.find, definition_id, revision, now_ms)
        return await self._connections.run("published_definition", read)

    async def wait(self, topics: Collection[str], timeout: float) -> None:
        """Return when one of `topics` may have changed, or after `timeout` seconds: at
        once for this store's writes, within about POLL_INTERVAL for other connections'."""
        if self._connections.closed:
            raise StoreUnavailableError("the sqlite store is closed")
        if self._polling is None and timeout > 0 and topics:
            self._polling = asyncio.ensure_future(self._poll())
        await self._wakeups.wait(topics, timeout)

    async def _poll(self) -> None:
        """Wake every waiter when another connection committed; stop when none waits."""
        try:
            await asyncio.sleep(0)  # the first waiter registers before the first look
            while self._wakeups.pending and not self._connections.closed:
                try:
                    version = self._connections.read_data_version()
                except (sqlite3.Error, StoreUnavailableError):
                    version = None  # waiters fall back on their timeouts; tried again
                    self._connections.data_version = None
                if version is not None:
                    if version != self._connections.data_version:
                        # Another connection committed since the last look (or since the
                        # store opened, or a look failed): every waiter re-reads.
                        self._wakeups.notify_all()
                    self._connections.data_version = version
                await asyncio.sleep(POLL_INTERVAL)
        finally:
            self._polling = None

    async def close(self) -> None:
        """Close the connections, stop the worker thread and wake every waiter.
        Idempotent."""
        if self._connections.closed:
            return
        self._connections.closed = True
        self._wakeups.notify_all()
        try:
            polling, self._polling = self._polling, None
            if polling is not None:
                polling.cancel()
                with suppress(asyncio.CancelledError):
                    await polling
            await self._connections.close()
        except sqlite3.Error as exc:
            raise unavailable("close", exc) from exc
        finally:
            self._connections.shutdown()


async def open_sqlite_store(
    path: str | os.PathLike[str],
    *,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    synchronous: str = DEFAULT_SYNCHRONOUS,
) -> SqliteStore:
    """A SqliteStore at `path`, connected, with its schema created or checked.

    Raises StoreUnavailableError, leaving nothing open, when the file is not a usable
    store (not SQLite, a newer schema version, unreadable); ValueError for a `synchronous`
    not in SYNCHRONOUS_MODES.
    """
    store = SqliteStore(path, busy_timeout_ms=busy_timeout_ms, synchronous=synchronous)
    try:
        await store.open()
    except BaseException:
        await store.close()
        raise
    return store


def _nothing(db: sqlite3.Connection) -> None:
    return None
