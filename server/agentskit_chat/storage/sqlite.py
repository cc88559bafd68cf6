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
database busy and queue behind it on the worker thread).

The schema version lives in `PRAGMA user_version`; a database written by a newer version
is refused, one of version 1 (before tenants) is migrated in place, its sessions moving
to the default tenant, one of version 2 gains the tables of live turns, and one of
version 3 gains the messages' tool data (empty for the messages it holds), and one of
version 4 the table of published definitions (`_published.py`). Every key is
(tenant, session id). Any number of stores, in any number of processes, may share one
file: compare-and-set is a conditional `UPDATE` inside a write transaction.

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
import threading
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Final, TypeVar

from . import _sqlite_definitions as published
from . import _sqlite_turns as turns
from ._files import create_private_file, private_dir, warn_if_exposed
from ._ports import (
    DEFAULT_TENANT,
    HistoryChange,
    HistoryMode,
    SessionExistsError,
    StoreCorruptError,
    StoredMessage,
    StoredSession,
    StoreUnavailableError,
)
from ._published import FoundDefinition, PublishedDefinition, check_published
from ._turn_events import (
    EventBatch,
    TurnKey,
    TurnSignal,
    holder_topic,
    turn_topic,
)
from ._wakeups import Wakeups
from .memory import _check_compare_and_set, check_batch, frozen_batch

SCHEMA_VERSION: Final = 5
SYNCHRONOUS_MODES: Final = ("normal", "full")
"""SQLite's `PRAGMA synchronous` settings a store may use (see the module's docstring)."""
DEFAULT_SYNCHRONOUS: Final = "normal"
DEFAULT_BUSY_TIMEOUT_MS: Final = 5000
CHECKPOINT_EVERY: Final = 256
RESTART_EVERY: Final = 4
"""Every RESTART_EVERY-th checkpoint waits for writers so the log starts over."""
POLL_INTERVAL: Final = 0.05
"""Seconds between two looks for other processes' writes, while someone waits."""
_BUSY: Final = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_CREATING: Final = threading.Lock()
"""Held while this process creates a database file and closes its descriptor."""

T = TypeVar("T")

_TABLES: Final = (
    """CREATE TABLE sessions (
        tenant TEXT NOT NULL,
        session_id TEXT NOT NULL,
        definition_id TEXT NOT NULL,
        revision INTEGER NOT NULL,
        history_mode TEXT NOT NULL,
        cursor INTEGER NOT NULL,
        record BLOB NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        incarnation TEXT NOT NULL,
        PRIMARY KEY (tenant, session_id)
    )""",
    """CREATE TABLE messages (
        tenant TEXT NOT NULL,
        session_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        message_id TEXT NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        tools TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (tenant, session_id, position),
        FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, session_id)
            ON DELETE CASCADE
    )""",
)
_SCHEMA: Final = (
    *_TABLES,
    *turns.TURN_TABLES,
    *published.DEFINITION_TABLES,
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)
_FROM_V1: Final = (
    "ALTER TABLE messages RENAME TO messages_v1",
    "ALTER TABLE sessions RENAME TO sessions_v1",
    *_TABLES,
    "INSERT INTO sessions SELECT '', session_id, definition_id, revision, history_mode, cursor,"
    " record, updated_at_ms, incarnation FROM sessions_v1",
    "INSERT INTO messages (tenant, session_id, position, message_id, role, content)"
    " SELECT '', session_id, position, message_id, role, content FROM messages_v1",
    "DROP TABLE messages_v1",
    "DROP TABLE sessions_v1",
    *turns.TURN_TABLES,
    *published.DEFINITION_TABLES,
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)
"""Version 1 had no tenants: its sessions move to the default tenant."""
_ADD_TOOLS: Final = "ALTER TABLE messages ADD COLUMN tools TEXT NOT NULL DEFAULT ''"
_FROM_V4: Final = (*published.DEFINITION_TABLES, f"PRAGMA user_version = {SCHEMA_VERSION}")
"""Version 4 published no definitions: their table is added."""
_FROM_V3: Final = (_ADD_TOOLS, *_FROM_V4)
"""Version 3 kept no tool data: its messages have none."""
_FROM_V2: Final = (*turns.TURN_TABLES, *_FROM_V3)
"""Version 2 had no live turns: their tables are added (and what versions 3 and 4 add)."""
_INSERT_SESSION: Final = (
    "INSERT INTO sessions (tenant, session_id, definition_id, revision, history_mode, cursor,"
    " record, updated_at_ms, incarnation) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (tenant, session_id) DO NOTHING"
)
_SELECT_SESSION: Final = (
    "SELECT session_id, definition_id, revision, history_mode, cursor,"
    " CAST(record AS BLOB), updated_at_ms, incarnation, tenant FROM sessions"
    " WHERE tenant = ? AND session_id = ?"
)
_UPDATE_SESSION: Final = (
    "UPDATE sessions SET definition_id = ?, revision = ?, history_mode = ?, cursor = ?,"
    " record = ?, updated_at_ms = ? WHERE tenant = ? AND session_id = ? AND cursor = ?"
    " AND incarnation = ?"
)
_DELETE_SESSION: Final = "DELETE FROM sessions WHERE tenant = ? AND session_id = ?"
_TRUNCATE_MESSAGES: Final = (
    "DELETE FROM messages WHERE tenant = ? AND session_id = ? AND position >= ?"
)
_HAS_MESSAGE_AT: Final = (
    "SELECT 1 FROM messages WHERE tenant = ? AND session_id = ? AND position = ?"
)
_DELETE_SESSION_AT: Final = (
    "DELETE FROM sessions WHERE tenant = ? AND session_id = ? AND cursor = ?"
)
_INSERT_MESSAGE: Final = (
    "INSERT INTO messages (tenant, session_id, position, message_id, role, content, tools)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_SELECT_MESSAGES: Final = (
    "SELECT message_id, role, CAST(content AS BLOB), CAST(tools AS BLOB) FROM messages"
    " WHERE tenant = ? AND session_id = ? ORDER BY position"
)


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
        self._busy_timeout_ms = busy_timeout_ms
        self._synchronous = synchronous
        self._writes_on_worker = synchronous != "normal"
        """Commits that sync to disk run on the worker thread, never on the event loop."""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-store")
        self._db: sqlite3.Connection | None = None
        """The worker thread's connection."""
        self._inline: sqlite3.Connection | None = None
        """The event loop's connection."""
        self._writes = 0
        self._checkpoint: asyncio.Future[None] | None = None
        self._wakeups = Wakeups()
        self._data_version: int | None = None
        self._polling: asyncio.Task[None] | None = None
        self._closed = False

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
        if self._writes_on_worker:
            await self._run("open", _nothing, write=True, counted=False)  # migrates there
        await self._run("open", _nothing)

    async def create(self, session: StoredSession) -> None:
        """Insert a new session; raises SessionExistsError when its tenant has the id."""
        inserted = await self._run("create", partial(_create, session), write=True)
        if not inserted:
            raise SessionExistsError("a session with this id already exists")
        self._wakeups.notify_session(session.tenant, session.session_id)

    async def load(self, session_id: str, *, tenant: str = DEFAULT_TENANT) -> StoredSession | None:
        """The tenant's stored session, or None."""
        return await self._run("load", partial(_load, tenant, session_id))

    async def compare_and_set(
        self,
        session: StoredSession,
        *,
        expected_cursor: int,
        history: HistoryChange | None = None,
    ) -> bool:
        """Replace the session if its stored cursor equals `expected_cursor`.

        Raises ValueError, writing nothing, when `session.cursor` is not
        `expected_cursor + 1`, when `history.keep` is negative, or when it exceeds the
        stored history's length.
        """
        _check_compare_and_set(session, expected_cursor, history)
        saved = await self._run(
            "compare_and_set",
            partial(_compare_and_set, session, expected_cursor, history),
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
        delete = partial(_delete, tenant, session_id, expected_cursor)
        deleted = await self._run("delete", delete, write=True)
        if deleted:
            self._wakeups.notify_session(tenant, session_id)
        return deleted

    async def list_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> Sequence[StoredMessage]:
        """The session's messages, oldest first, as a tuple; empty when there are none."""
        return await self._run("list_messages", partial(_list_messages, tenant, session_id))

    async def load_with_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> tuple[StoredSession, tuple[StoredMessage, ...]] | None:
        """The tenant's session and its messages, read in one transaction (one snapshot
        of the write-ahead log); None when missing."""
        read = partial(_load_with_messages, tenant, session_id)
        return await self._run("load_with_messages", read)

    async def append_events(self, key: TurnKey, batch: EventBatch, *, expires_at_ms: int) -> bool:
        """Store `batch`; False, writing nothing, when a stored batch of the turn holds one
        of its sequences or ended the turn, or when `batch` is final and a stored batch
        follows it. ValueError for a batch whose sequences are not 1 <= first <= last."""
        check_batch(batch)
        append = partial(turns.append_events, key, frozen_batch(batch), expires_at_ms)
        appended = await self._run("append_events", append, write=True)
        if appended:
            self._wakeups.notify(turn_topic(key))
        return appended

    async def read_events(
        self, key: TurnKey, after: int = 0, *, now_ms: int = 0
    ) -> tuple[EventBatch, ...]:
        """The turn's stored batches holding a sequence after `after`, in order, but for
        those expired at `now_ms`."""
        return await self._run("read_events", partial(turns.read_events, key, after, now_ms))

    async def newest_run(self, tenant: str, session_id: str, turn_id: str) -> str | None:
        """The name of the newest stored run of `turn_id`, or None."""
        find = partial(turns.newest_run_of, tenant, session_id, turn_id)
        return await self._run("newest_run", find)

    async def send_signal(self, signal: TurnSignal, *, expires_at_ms: int) -> None:
        """Leave `signal` for its holder; a repeated one keeps its place and the later
        of the two expiries."""
        await self._run(
            "send_signal", partial(turns.send_signal, signal, expires_at_ms), write=True
        )
        self._wakeups.notify(holder_topic(signal.holder))

    async def take_signals(self, holder: str) -> tuple[TurnSignal, ...]:
        """Remove and return the signals left for `holder`, oldest first."""
        return await self._run("take_signals", partial(turns.take_signals, holder), write=True)

    async def expire(self, now_ms: int) -> int:
        """Drop the batches and signals whose expiry is at or before `now_ms` (at most
        turns.EXPIRE_LIMIT of each per call); how many."""
        return await self._run("expire", partial(turns.expire, now_ms), write=True)

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
        await self._run("publish_definitions", write, write=True)

    async def published_definition(
        self, definition_id: str, revision: int, *, now_ms: int
    ) -> FoundDefinition | None:
        """The document of a revision some unexpired row names, or None."""
        read = partial(published.find, definition_id, revision, now_ms)
        return await self._run("published_definition", read)

    async def wait(self, topics: Collection[str], timeout: float) -> None:
        """Return when one of `topics` may have changed, or after `timeout` seconds: at
        once for this store's writes, within about POLL_INTERVAL for other connections'."""
        if self._closed:
            raise StoreUnavailableError("the sqlite store is closed")
        if self._polling is None and timeout > 0 and topics:
            self._polling = asyncio.ensure_future(self._poll())
        await self._wakeups.wait(topics, timeout)

    async def _poll(self) -> None:
        """Wake every waiter when another connection committed; stop when none waits."""
        try:
            await asyncio.sleep(0)  # the first waiter registers before the first look
            while self._wakeups.pending and not self._closed:
                try:
                    version = self._read_data_version()
                except (sqlite3.Error, StoreUnavailableError):
                    version = None  # waiters fall back on their timeouts; tried again
                    self._data_version = None
                if version is not None:
                    if version != self._data_version:
                        # Another connection committed since the last look (or since the
                        # store opened, or a look failed): every waiter re-reads.
                        self._wakeups.notify_all()
                    self._data_version = version
                await asyncio.sleep(POLL_INTERVAL)
        finally:
            self._polling = None

    def _read_data_version(self) -> int:
        # Never inside a transaction: every statement on this connection runs and commits
        # (or rolls back) synchronously on the event loop, between two of these reads.
        (version,) = self._inline_connection().execute("PRAGMA data_version").fetchone()
        return int(version)

    async def close(self) -> None:
        """Close the connections, stop the worker thread and wake every waiter.
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._wakeups.notify_all()
        loop = asyncio.get_running_loop()
        try:
            polling, self._polling = self._polling, None
            if polling is not None:
                polling.cancel()
                with suppress(asyncio.CancelledError):
                    await polling
            if self._checkpoint is not None:
                with suppress(StoreUnavailableError):
                    await self._checkpoint
            inline, self._inline = self._inline, None
            if inline is not None:
                inline.close()
            await loop.run_in_executor(self._executor, self._close_on_worker)
        except sqlite3.Error as exc:
            raise _unavailable("close", exc) from exc
        finally:
            self._executor.shutdown(wait=True)

    async def _run(
        self,
        operation: str,
        work: Callable[[sqlite3.Connection], T],
        *,
        write: bool = False,
        counted: bool = True,
    ) -> T:
        if self._closed:
            raise StoreUnavailableError("the sqlite store is closed")
        try:
            if write and self._writes_on_worker:
                raise _BusyError  # a commit that syncs to disk: on the worker thread
            result = self._attempt(operation, work)
        except _BusyError:
            loop = asyncio.get_running_loop()
            waiting = loop.run_in_executor(self._executor, self._on_worker, operation, work)
            # Once submitted, the statement runs even if the caller is cancelled: it happens
            # whole or not at all, never dropped from the queue half-way through a turn.
            result = await asyncio.shield(waiting)
        if write and counted:
            self._count_write()
        return result

    def _attempt(self, operation: str, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` on the event loop's connection; raises _BusyError instead of waiting."""
        try:
            db = self._inline_connection()
        except sqlite3.Error as exc:
            if _busy(exc):
                raise _BusyError from exc
            raise _unavailable(operation, exc) from exc
        try:
            return work(db)
        except BaseException as exc:
            _rollback(db)
            if isinstance(exc, sqlite3.Error):
                if _busy(exc):
                    raise _BusyError from exc
                raise _unavailable(operation, exc) from exc
            raise

    def _inline_connection(self) -> sqlite3.Connection:
        if self._inline is None:
            self._inline = self._open_connection(busy_timeout_ms=0)
            with suppress(sqlite3.Error, StoreUnavailableError):
                # What a first wait compares with: any commit after this wakes it.
                self._data_version = self._read_data_version()
        return self._inline

    def _count_write(self) -> None:
        self._writes += 1
        if self._writes % CHECKPOINT_EVERY or self._checkpoint is not None or self._closed:
            return
        loop = asyncio.get_running_loop()
        mode = "RESTART" if self._writes % (CHECKPOINT_EVERY * RESTART_EVERY) == 0 else "PASSIVE"
        work = partial(_checkpoint, mode)
        future = loop.run_in_executor(self._executor, self._on_worker, "checkpoint", work)
        self._checkpoint = future
        future.add_done_callback(self._checkpointed)

    def _checkpointed(self, future: asyncio.Future[None]) -> None:
        self._checkpoint = None
        if not future.cancelled():
            future.exception()  # A failed checkpoint is retried by the next one.

    def _on_worker(self, operation: str, work: Callable[[sqlite3.Connection], T]) -> T:
        try:
            db = self._connection()
        except sqlite3.Error as exc:
            raise _unavailable(operation, exc) from exc
        try:
            return work(db)
        except BaseException as exc:
            _rollback(db)
            if isinstance(exc, sqlite3.Error):
                raise _unavailable(operation, exc) from exc
            raise

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = self._open_connection(busy_timeout_ms=self._busy_timeout_ms)
        return self._db

    def _open_connection(self, *, busy_timeout_ms: int) -> sqlite3.Connection:
        try:
            created = private_dir(self._path.parent)
            _create_owner_only(self._path)
        except OSError as exc:
            raise StoreUnavailableError(
                f"cannot create the sqlite store's file: {exc.strerror}"
            ) from exc
        if not created:
            warn_if_exposed(self._path.parent, "the sqlite store's directory")
        warn_if_exposed(self._path, "the sqlite store's file")
        db = sqlite3.connect(
            self._path,
            timeout=busy_timeout_ms / 1000,
            isolation_level=None,
            cached_statements=32,
        )
        try:
            db.execute(f"PRAGMA busy_timeout = {busy_timeout_ms:d}")
            db.execute("PRAGMA wal_autocheckpoint = 0")
            db.execute("PRAGMA foreign_keys = ON")
            (mode,) = db.execute("PRAGMA journal_mode = WAL").fetchone()
            if str(mode).lower() != "wal":
                raise StoreUnavailableError(
                    f"the sqlite store could not enable WAL journal mode (got {mode!s})"
                )
            db.execute(f"PRAGMA synchronous = {self._synchronous.upper()}")
            _migrate(db)
        except BaseException:
            _rollback(db)
            db.close()
            raise
        return db

    def _close_on_worker(self) -> None:
        db, self._db = self._db, None
        if db is None:
            return
        try:
            db.close()
        except sqlite3.Error as exc:
            raise _unavailable("close", exc) from exc


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


def _migrate(db: sqlite3.Connection) -> None:
    if _user_version(db) == SCHEMA_VERSION:
        return
    db.execute("BEGIN IMMEDIATE")
    version = _user_version(db)
    if version > SCHEMA_VERSION:
        raise StoreUnavailableError(
            f"the sqlite store has schema version {version}, newer than the supported"
            f" version {SCHEMA_VERSION}; upgrade agentskit-chat"
        )
    if version == 0:
        if db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is not None:
            raise StoreUnavailableError(
                "the sqlite file holds tables but no schema version: not a session store"
            )
        for statement in _SCHEMA:
            db.execute(statement)
    elif version == 1:
        for statement in _FROM_V1:
            db.execute(statement)
    elif version == 2:
        for statement in _FROM_V2:
            db.execute(statement)
    elif version == 3:
        for statement in _FROM_V3:
            db.execute(statement)
    elif version == 4:
        for statement in _FROM_V4:
            db.execute(statement)
    db.execute("COMMIT")


def _create_owner_only(path: Path) -> None:
    """Create the database file, readable by its owner only, unless it exists.

    Message text is stored here (the WAL and shm files take the same permissions). An
    existing file is never opened: closing any descriptor of a file releases every POSIX
    lock the process holds on it, including the shared lock through which SQLite's
    connections keep other processes from checkpointing and deleting the write-ahead log
    under them when those close. The module lock keeps the connections of this process's
    other stores off a file created here until its descriptor is closed.
    """
    with _CREATING:
        create_private_file(path)


def _user_version(db: sqlite3.Connection) -> int:
    (version,) = db.execute("PRAGMA user_version").fetchone()
    return int(version)


def _busy(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in _BUSY


class _BusyError(Exception):
    """Another connection holds a lock the event loop's connection will not wait for."""


def _nothing(db: sqlite3.Connection) -> None:
    return None


def _checkpoint(mode: str, db: sqlite3.Connection) -> None:
    db.execute(f"PRAGMA wal_checkpoint({mode})").fetchall()


def _create(session: StoredSession, db: sqlite3.Connection) -> bool:
    cursor = db.execute(
        _INSERT_SESSION,
        (
            session.tenant,
            session.session_id,
            session.definition_id,
            session.revision,
            str(session.history_mode),
            session.cursor,
            session.record,
            session.updated_at_ms,
            session.incarnation,
        ),
    )
    return cursor.rowcount == 1


def _load(tenant: str, session_id: str, db: sqlite3.Connection) -> StoredSession | None:
    row = db.execute(_SELECT_SESSION, (tenant, session_id)).fetchone()
    if row is None:
        return None
    try:
        history_mode = HistoryMode(row[3])
    except ValueError:
        raise StoreCorruptError("a stored session has an unknown history mode") from None
    if not isinstance(row[2], int) or not isinstance(row[4], int):
        raise StoreCorruptError("a stored session has a non-integer revision or cursor")
    return StoredSession(
        session_id=row[0],
        definition_id=row[1],
        revision=row[2],
        history_mode=history_mode,
        cursor=row[4],
        record=bytes(row[5] or b""),
        updated_at_ms=row[6],
        incarnation=row[7],
        tenant=row[8],
    )


def _compare_and_set(
    session: StoredSession,
    expected_cursor: int,
    history: HistoryChange | None,
    db: sqlite3.Connection,
) -> bool:
    tenant, session_id = session.tenant, session.session_id
    update = (
        session.definition_id,
        session.revision,
        str(session.history_mode),
        session.cursor,
        session.record,
        session.updated_at_ms,
        tenant,
        session_id,
        expected_cursor,
        session.incarnation,
    )
    if history is None:
        return db.execute(_UPDATE_SESSION, update).rowcount == 1
    keep = history.keep
    db.execute("BEGIN IMMEDIATE")
    if db.execute(_UPDATE_SESSION, update).rowcount != 1:
        db.execute("ROLLBACK")
        return False
    db.execute(_TRUNCATE_MESSAGES, (tenant, session_id, keep))
    if keep > 0 and db.execute(_HAS_MESSAGE_AT, (tenant, session_id, keep - 1)).fetchone() is None:
        raise ValueError("history.keep exceeds the number of stored messages")
    if history.append:
        db.executemany(
            _INSERT_MESSAGE,
            [
                (tenant, session_id, keep + offset, m.message_id, m.role, m.content, m.tools)
                for offset, m in enumerate(history.append)
            ],
        )
    db.execute("COMMIT")
    return True


def _delete(
    tenant: str, session_id: str, expected_cursor: int | None, db: sqlite3.Connection
) -> bool:
    if expected_cursor is None:
        deleted = db.execute(_DELETE_SESSION, (tenant, session_id))
    else:
        deleted = db.execute(_DELETE_SESSION_AT, (tenant, session_id, expected_cursor))
    if deleted.rowcount != 1:
        return False
    db.execute(turns.DELETE_SESSION_EVENTS, (tenant, session_id))  # its turns' events
    return True


def _list_messages(
    tenant: str, session_id: str, db: sqlite3.Connection
) -> tuple[StoredMessage, ...]:
    rows = db.execute(_SELECT_MESSAGES, (tenant, session_id)).fetchall()
    try:
        return tuple(
            StoredMessage(
                row[0], row[1], bytes(row[2]).decode("utf-8"), bytes(row[3]).decode("utf-8")
            )
            for row in rows
        )
    except UnicodeDecodeError:
        raise StoreCorruptError("a stored message is not valid UTF-8") from None


def _load_with_messages(
    tenant: str, session_id: str, db: sqlite3.Connection
) -> tuple[StoredSession, tuple[StoredMessage, ...]] | None:
    db.execute("BEGIN")  # deferred: one read snapshot for both statements, no write lock
    stored = _load(tenant, session_id, db)
    messages = () if stored is None else _list_messages(tenant, session_id, db)
    db.execute("COMMIT")
    return None if stored is None else (stored, messages)


def _rollback(db: sqlite3.Connection) -> None:
    if db.in_transaction:
        with suppress(sqlite3.Error):
            db.execute("ROLLBACK")


def _unavailable(operation: str, error: sqlite3.Error) -> StoreUnavailableError:
    code = error.sqlite_errorname or type(error).__name__
    return StoreUnavailableError(f"sqlite store {operation} failed: {error} ({code})")
