"""PostgreSQL backend: a psycopg 3 async connection pool, for replicas that share sessions.

Every key is (tenant, session id). Compare-and-set is one conditional `UPDATE ... WHERE
cursor = expected AND incarnation = ...`; a history change runs in the same transaction,
so a lost compare-and-set writes nothing: function `save_session` (created by the first
migration, with the messages' tool data by the third) does both in one statement, one
round trip. Leases live in the session record and so go through the same compare-and-set.
The statements of sessions and messages are in `_postgresql_sessions.py`; the pool and
the other connections in `_postgresql_connections.py`.

Live turns (`TurnEventStore`, the second migration): event batches and signals live in
tables of their own. Wake-ups go through LISTEN/NOTIFY on channel NOTIFY_CHANNEL, the
payload being the topic. Every write that wakes a topic (create, compare-and-set and
delete of a session, `append_turn_events`, a signal) notifies it in the same statement,
so a turn costs no extra round trip and the notification is sent if and only if the write
commits; but only when some store waits on the topic (table `wake_interest`, which `wait`
fills and `expire` empties): PostgreSQL serialises the commits of every transaction that
notifies, which would otherwise cost every turn of every session. A store's first wait on
a topic returns at once (earlier writes notified nobody: the caller reads again), and its
waits on it end within INTEREST_GRACE for a moment (a write under way when the topic was
registered may not have seen it). Each store listens on one connection of its own, opened
on the first `wait`; when it breaks, waiters fall back on their timeouts and every waiter
is woken (it may have missed a notification) once the store listens again. LISTEN needs
a session-level connection: a pooler in transaction mode in front of the server does not
carry it.

The schema is versioned: `MIGRATIONS[n - 1]` brings a database from version n - 1 to n,
and table `schema_migrations` records each applied version. `migrate()` (the
`agentskit-chat migrate` command, or `serve --migrate`) applies the missing ones under an
advisory lock, so replicas starting together migrate once. The third migration adds each
message's tool data (column `tools`, empty for the messages stored before) and a
`save_session` that writes it; the previous one stays, for the replicas of the previous
version that run until they are replaced. The fifth adds `record_digest`, the SHA-256 of
the record that PostgreSQL computes on every write (a generated column: whoever writes,
old replicas and hand-written SQL included), which a compare-and-set given
`expected_record` compares, and a `save_session` that takes that digest. A store opened
without migrating refuses a database whose version is not `SCHEMA_VERSION`. The
migrations and the version checks are in `_postgresql_schema.py`.

Error messages never contain stored content, the password or the server's own message
text (which may quote values): only the operation, the error class and its SQLSTATE.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Sequence
from functools import partial
from typing import Any, Final

import psycopg
from psycopg import AsyncConnection

from . import _postgresql_definitions as published
from . import _postgresql_schema as schema
from . import _postgresql_sessions as sessions
from . import _postgresql_turns as turns
from ._ports import (
    DEFAULT_TENANT,
    HistoryChange,
    SessionExistsError,
    StoreCorruptError,
    StoredMessage,
    StoredSession,
    StoreUnavailableError,
)
from ._postgresql_connections import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from ._postgresql_connections import Connections
from ._postgresql_connections import conninfo as conninfo
from ._postgresql_connections import describe as describe
from ._postgresql_schema import KEEP_BEYOND_HISTORY as KEEP_BEYOND_HISTORY
from ._postgresql_schema import MIGRATION_LOCK as MIGRATION_LOCK
from ._postgresql_schema import MIGRATIONS as MIGRATIONS
from ._postgresql_schema import SCHEMA_VERSION as SCHEMA_VERSION
from ._postgresql_turns import INTEREST_GRACE as INTEREST_GRACE
from ._postgresql_turns import NOTIFY_CHANNEL as NOTIFY_CHANNEL
from ._published import FoundDefinition, PublishedDefinition, check_published
from ._turn_events import (
    EventBatch,
    SignalKind,
    TurnKey,
    TurnSignal,
    holder_topic,
    newest_run,
    session_topic,
    turn_topic,
)
from ._wakeups import Wakeups
from .memory import _check_compare_and_set, check_batch, frozen_batch

DEFAULT_POOL_SIZE: Final = 8


class PostgresqlStore:
    """A `Store` in one PostgreSQL database (the schema on the connection's search path).

    `url` is a libpq URI (`postgresql://user@host:port/database?sslmode=...`); `password`,
    when given, is passed to libpq beside it, so that it appears in no URL. libpq's own
    environment (PGPASSWORD, PGPASSFILE, PGSSLMODE, ...) applies as usual. Connect with
    `open()`, or use `open_postgresql_store`. Failures of the server or the network raise
    StoreUnavailableError; rows that cannot be read back raise StoreCorruptError.
    """

    def __init__(
        self,
        url: str,
        *,
        password: str | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
        timeout: float | None = None,
    ) -> None:
        if pool_size < 1:
            raise ValueError("pool_size must be at least 1")
        self._connections = Connections(
            url, password=password, pool_size=pool_size, timeout=timeout
        )
        self._wakeups = Wakeups()
        self._interest = turns.Interest()
        self._listener = turns.Listener(
            self._connections.conninfo,
            timeout=self._connections.timeout,
            wakeups=self._wakeups,
            describe=self._connections.describe,
        )

    async def open(self, *, migrate: bool = False) -> None:
        """Connect, migrate the schema when `migrate` is set, check its version, and
        start the pool. StoreUnavailableError when any of it fails."""
        if self._connections.closed:
            raise StoreUnavailableError("the postgresql store is closed")
        if self._connections.opened:
            return
        connection = await self._connections.connect_once()
        try:
            async with connection:
                if migrate:
                    await schema.migrate(connection)
                await schema.check_version(connection)
        except psycopg.Error as exc:
            raise self._connections.unavailable("open", exc) from exc
        await self._connections.open_pool()

    async def migrate(self) -> tuple[int, int]:
        """Apply the missing migrations; (version before, version after)."""
        if self._connections.closed:
            raise StoreUnavailableError("the postgresql store is closed")
        connection = await self._connections.connect_once()
        try:
            async with connection:
                return await schema.migrate(connection)
        except psycopg.Error as exc:
            raise self._connections.unavailable("migrate", exc) from exc

    async def create(self, session: StoredSession) -> None:
        """Insert a new session; raises SessionExistsError when its tenant has the id."""
        insert = partial(sessions.insert, sessions.insert_row(session))
        if not await self._connections.write("create", insert):
            raise SessionExistsError("a session with this id already exists")

    async def load(self, session_id: str, *, tenant: str = DEFAULT_TENANT) -> StoredSession | None:
        """The tenant's stored session, or None."""
        async with self._connections.checkout("load") as db:
            row = await sessions.select_session(db, tenant, session_id)
        return None if row is None else sessions.session_of_row(row)

    async def compare_and_set(
        self,
        session: StoredSession,
        *,
        expected_cursor: int,
        history: HistoryChange | None = None,
        expected_record: bytes | None = None,
    ) -> bool:
        """Replace the session if its stored cursor equals `expected_cursor` (and, when
        `expected_record` is given, its column `record_digest` that record's digest).

        Raises ValueError, writing nothing, when `session.cursor` is not
        `expected_cursor + 1`, when `history.keep` is negative, or when it exceeds the
        stored history's length.
        """
        _check_compare_and_set(session, expected_cursor, history)
        if history is None:
            statement, params = sessions.update_row(session, expected_cursor, expected_record)
            update = partial(sessions.update, statement, params)
            return await self._connections.write("compare_and_set", update)
        row = sessions.save_row(session, expected_cursor, history, expected_record)
        return await self._connections.write("compare_and_set", partial(sessions.save, row))

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
        wake = (NOTIFY_CHANNEL, session_topic(tenant, session_id))
        remove = partial(sessions.delete, tenant, session_id, expected_cursor, wake)
        return await self._connections.write("delete", remove)

    async def list_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> Sequence[StoredMessage]:
        """The session's messages, oldest first, as a tuple; empty when there are none."""
        async with self._connections.checkout("list_messages") as db:
            rows = await sessions.select_messages(db, tenant, session_id)
        return sessions.messages_of_rows(rows)

    async def load_with_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> tuple[StoredSession, tuple[StoredMessage, ...]] | None:
        """The tenant's session and its messages, read by one statement (one snapshot,
        whatever commits meanwhile); None when missing."""
        async with self._connections.checkout("load_with_messages") as db:
            row = await sessions.select_with_messages(db, tenant, session_id)
        return None if row is None else sessions.with_messages_of_row(row)

    async def append_events(self, key: TurnKey, batch: EventBatch, *, expires_at_ms: int) -> bool:
        """Store `batch`; False, writing nothing, when a stored batch of the turn holds one
        of its sequences or ended the turn, or when `batch` is final and a stored batch
        follows it. ValueError for a batch whose sequences are not 1 <= first <= last."""
        check_batch(batch)
        batch = frozen_batch(batch)
        row = (
            key.tenant,
            key.session_id,
            key.turn_id,
            batch.first,
            batch.last,
            batch.final,
            batch.body,
            expires_at_ms,
            NOTIFY_CHANNEL,
            turn_topic(key),
        )

        async def append(db: AsyncConnection[Any]) -> bool:
            found = await (await db.execute(turns.APPEND_EVENTS, row)).fetchone()
            return found is not None and found[0] is True

        return await self._connections.write("append_events", append)

    async def read_events(
        self, key: TurnKey, after: int = 0, *, now_ms: int = 0
    ) -> tuple[EventBatch, ...]:
        """The turn's stored batches holding a sequence after `after`, in order, but for
        those expired at `now_ms`."""
        turn = (key.tenant, key.session_id, key.turn_id, after, now_ms)
        async with self._connections.checkout("read_events") as db:
            rows = await (await db.execute(turns.SELECT_EVENTS, turn)).fetchall()
        return tuple(turns.batch_of_row(row) for row in rows)

    async def newest_run(self, tenant: str, session_id: str, turn_id: str) -> str | None:
        """The name of the newest stored run of `turn_id`, or None."""
        prefix = f"{turn_id}@"
        async with self._connections.checkout("newest_run") as db:
            found = await db.execute(turns.SELECT_RUNS, (tenant, session_id, prefix, prefix))
            rows = await found.fetchall()
        return newest_run([name for (name,) in rows if isinstance(name, str)], turn_id)

    async def send_signal(self, signal: TurnSignal, *, expires_at_ms: int) -> None:
        """Leave `signal` for its holder; a repeated one keeps its place and the later
        of the two expiries."""
        key = signal.key
        row = (
            signal.holder,
            str(signal.kind),
            key.tenant,
            key.session_id,
            key.turn_id,
            expires_at_ms,
            NOTIFY_CHANNEL,
            holder_topic(signal.holder),
        )

        async def send(db: AsyncConnection[Any]) -> None:
            await db.execute(turns.SEND_SIGNAL, row)

        await self._connections.write("send_signal", send)

    async def take_signals(self, holder: str) -> tuple[TurnSignal, ...]:
        """Remove and return the signals left for `holder`, oldest first."""

        async def take(db: AsyncConnection[Any]) -> list[tuple[Any, ...]]:
            return await (await db.execute(turns.TAKE_SIGNALS, {"holder": holder})).fetchall()

        rows = sorted(
            await self._connections.write("take_signals", take), key=lambda row: row[0] or 0
        )
        if any(row[0] is None for row in rows):
            raise StoreCorruptError("a stored turn signal has an unknown kind")
        return tuple(
            TurnSignal(holder, SignalKind(kind), TurnKey(tenant, session_id, turn_id))
            for _, kind, tenant, session_id, turn_id in rows
        )

    async def expire(self, now_ms: int) -> int:
        """Drop the batches and signals whose expiry is at or before `now_ms` (at most
        turns.EXPIRE_LIMIT of each per call); how many."""

        async def expire(db: AsyncConnection[Any]) -> int:
            row = await (await db.execute(turns.EXPIRE, {"now": now_ms})).fetchone()
            return int(row[0]) if row is not None else 0

        return await self._connections.write("expire", expire)

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
        rows = tuple(definitions)

        async def write(db: AsyncConnection[Any]) -> None:
            await published.publish(db, publisher, rows, expires_at_ms, now_ms)

        await self._connections.write("publish_definitions", write)

    async def published_definition(
        self, definition_id: str, revision: int, *, now_ms: int
    ) -> FoundDefinition | None:
        """The document of a revision some unexpired row names, or None."""
        async with self._connections.checkout("published_definition") as db:
            return await published.find(db, definition_id, revision, now_ms)

    async def wait(self, topics: Collection[str], timeout: float) -> None:
        """Return when one of `topics` may have changed, or after `timeout` seconds.

        The first call opens the store's listening connection. While it is not listening
        (not yet, or after it broke) waits run to their timeouts; each time it starts
        listening every waiter is woken. A topic this store did not wait on lately is
        registered first (one statement), and the call returns at once; a registration
        that fails shortens the wait instead. Raises StoreUnavailableError only when the
        store is closed or not open."""
        self._connections.check_open()
        if timeout > 0 and topics:
            self._listener.start()
            loop = asyncio.get_running_loop()
            due, new = self._interest.due(topics, loop.time())
            if due:
                try:
                    await self._register(due)
                except StoreUnavailableError:
                    timeout = min(timeout, turns.INTEREST_GRACE)  # the caller reads again
                else:
                    self._interest.registered(due, loop.time())
                    if new:
                        return  # writes until now notified nobody: the caller reads again
            timeout = self._interest.bound(topics, loop.time(), timeout)
        await self._wakeups.wait(topics, timeout)

    async def _register(self, topics: list[str]) -> None:
        expires_at_ms = int(time.time() * 1000) + turns.INTEREST_TTL_MS

        async def register(db: AsyncConnection[Any]) -> None:
            await db.execute(turns.REGISTER, (topics, expires_at_ms))

        await self._connections.write("wait", register)

    async def close(self) -> None:
        """Close every connection and wake every waiter. Idempotent; later calls raise
        StoreUnavailableError."""
        if self._connections.closed:
            return
        self._connections.closed = True
        self._wakeups.notify_all()
        self._connections.stop_checking()
        await self._listener.close()
        await self._connections.close()


async def open_postgresql_store(
    url: str,
    *,
    password: str | None = None,
    migrate: bool = False,
    pool_size: int = DEFAULT_POOL_SIZE,
    timeout: float | None = None,
) -> PostgresqlStore:
    """A connected PostgresqlStore, its schema migrated first when `migrate` is set.

    Raises StoreUnavailableError, leaving nothing open, when the server cannot be reached
    or the schema is missing, older (without `migrate`) or newer than this version's.
    """
    store = PostgresqlStore(url, password=password, pool_size=pool_size, timeout=timeout)
    try:
        await store.open(migrate=migrate)
    except BaseException:
        await store.close()
        raise
    return store
