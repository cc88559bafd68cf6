"""The SQLite store's connections (see sqlite.py): the event loop's, which never waits for a
lock, the worker thread's, which does, the choice between them for each statement, the
checkpoints every CHECKPOINT_EVERY writes, and the creation of the database file."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Final, TypeVar

from ._files import create_private_file, private_dir, warn_if_exposed
from ._ports import StoreUnavailableError
from ._sqlite_schema import migrate

CHECKPOINT_EVERY: Final = 256
RESTART_EVERY: Final = 4
"""Every RESTART_EVERY-th checkpoint waits for writers so the log starts over."""
_BUSY: Final = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_CREATING: Final = threading.Lock()
"""Held while this process creates a database file and closes its descriptor."""

T = TypeVar("T")


class Connections:
    """The two connections of one SqliteStore and its worker thread, opened on first use.

    `run` runs a statement on the event loop's connection, and again on the worker thread's
    when another connection holds the write lock (or, with `writes_on_worker`, any write
    at once there); failures of SQLite raise StoreUnavailableError after rolling back.
    Each connection creates or checks the schema when it opens.
    """

    def __init__(self, path: Path, *, busy_timeout_ms: int, synchronous: str) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._synchronous = synchronous
        self.writes_on_worker = synchronous != "normal"
        """Commits that sync to disk run on the worker thread, never on the event loop."""
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-store")
        """The worker thread."""
        self._db: sqlite3.Connection | None = None
        """The worker thread's connection."""
        self._inline: sqlite3.Connection | None = None
        """The event loop's connection."""
        self._writes = 0
        self._checkpoint: asyncio.Future[None] | None = None
        self.data_version: int | None = None
        """`PRAGMA data_version` as the store last saw it; first read when the event loop's
        connection opens."""
        self.closed = False
        """Set when the store closes: `run` then refuses, and no checkpoint starts."""

    async def run(
        self,
        operation: str,
        work: Callable[[sqlite3.Connection], T],
        *,
        write: bool = False,
        counted: bool = True,
    ) -> T:
        """Run `work` on the event loop's connection, or on the worker thread's when the
        database is busy or `work` writes with a sync; a counted write may start a
        checkpoint."""
        if self.closed:
            raise StoreUnavailableError("the sqlite store is closed")
        try:
            if write and self.writes_on_worker:
                raise _BusyError  # a commit that syncs to disk: on the worker thread
            result = self.attempt(operation, work)
        except _BusyError:
            loop = asyncio.get_running_loop()
            waiting = loop.run_in_executor(self.executor, self.on_worker, operation, work)
            # Once submitted, the statement runs even if the caller is cancelled: it happens
            # whole or not at all, never dropped from the queue half-way through a turn.
            result = await asyncio.shield(waiting)
        if write and counted:
            self._count_write()
        return result

    def attempt(self, operation: str, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` on the event loop's connection; raises _BusyError instead of waiting."""
        try:
            db = self.inline_connection()
        except sqlite3.Error as exc:
            if _busy(exc):
                raise _BusyError from exc
            raise unavailable(operation, exc) from exc
        try:
            return work(db)
        except BaseException as exc:
            _rollback(db)
            if isinstance(exc, sqlite3.Error):
                if _busy(exc):
                    raise _BusyError from exc
                raise unavailable(operation, exc) from exc
            raise

    def inline_connection(self) -> sqlite3.Connection:
        """The event loop's connection, opened (and `data_version` read) on first use."""
        if self._inline is None:
            self._inline = self._open_connection(busy_timeout_ms=0)
            with suppress(sqlite3.Error, StoreUnavailableError):
                # What a first wait compares with: any commit after this wakes it.
                self.data_version = self.read_data_version()
        return self._inline

    def _count_write(self) -> None:
        self._writes += 1
        if self._writes % CHECKPOINT_EVERY or self._checkpoint is not None or self.closed:
            return
        loop = asyncio.get_running_loop()
        mode = "RESTART" if self._writes % (CHECKPOINT_EVERY * RESTART_EVERY) == 0 else "PASSIVE"
        work = partial(_checkpoint, mode)
        future = loop.run_in_executor(self.executor, self.on_worker, "checkpoint", work)
        self._checkpoint = future
        future.add_done_callback(self._checkpointed)

    def _checkpointed(self, future: asyncio.Future[None]) -> None:
        self._checkpoint = None
        if not future.cancelled():
            future.exception()  # A failed checkpoint is retried by the next one.

    def on_worker(self, operation: str, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` on the worker thread's connection (call it on that thread)."""
        try:
            db = self._connection()
        except sqlite3.Error as exc:
            raise unavailable(operation, exc) from exc
        try:
            return work(db)
        except BaseException as exc:
            _rollback(db)
            if isinstance(exc, sqlite3.Error):
                raise unavailable(operation, exc) from exc
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
            migrate(db)
        except BaseException:
            _rollback(db)
            db.close()
            raise
        return db

    def read_data_version(self) -> int:
        # Never inside a transaction: every statement on this connection runs and commits
        # (or rolls back) synchronously on the event loop, between two of these reads.
        (version,) = self.inline_connection().execute("PRAGMA data_version").fetchone()
        return int(version)

    async def close(self) -> None:
        """Wait for a checkpoint under way, then close both connections; sqlite3.Error
        when the event loop's fails to close. `shutdown` then stops the worker thread."""
        loop = asyncio.get_running_loop()
        if self._checkpoint is not None:
            with suppress(StoreUnavailableError):
                await self._checkpoint
        inline, self._inline = self._inline, None
        if inline is not None:
            inline.close()
        await loop.run_in_executor(self.executor, self._close_on_worker)

    def shutdown(self) -> None:
        """Stop the worker thread, once the work queued there is done."""
        self.executor.shutdown(wait=True)

    def _close_on_worker(self) -> None:
        db, self._db = self._db, None
        if db is None:
            return
        try:
            db.close()
        except sqlite3.Error as exc:
            raise unavailable("close", exc) from exc


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


def _busy(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in _BUSY


class _BusyError(Exception):
    """Another connection holds a lock the event loop's connection will not wait for."""


def _checkpoint(mode: str, db: sqlite3.Connection) -> None:
    db.execute(f"PRAGMA wal_checkpoint({mode})").fetchall()


def _rollback(db: sqlite3.Connection) -> None:
    if db.in_transaction:
        with suppress(sqlite3.Error):
            db.execute("ROLLBACK")


def unavailable(operation: str, error: sqlite3.Error) -> StoreUnavailableError:
    code = error.sqlite_errorname or type(error).__name__
    return StoreUnavailableError(f"sqlite store {operation} failed: {error} ({code})")
