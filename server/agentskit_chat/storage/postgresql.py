"""PostgreSQL backend: a psycopg 3 async connection pool, for replicas that share sessions.

Every key is (tenant, session id). Compare-and-set is one conditional `UPDATE ... WHERE
cursor = expected AND incarnation = ...`; a history change runs in the same transaction,
so a lost compare-and-set writes nothing: function `save_session` (created by the first
migration, with the messages' tool data by the third) does both in one statement, one
round trip. Leases live in the session record and so go through the same compare-and-set.

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
version that run until they are replaced. A store opened without migrating refuses a
database whose version is not `SCHEMA_VERSION`.

Error messages never contain stored content, the password or the server's own message
text (which may quote values): only the operation, the error class and its SQLSTATE.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Final, TypeVar

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from . import _postgresql_definitions as published
from . import _postgresql_turns as turns
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
from ._postgresql_pool import Checkout, Connection, bytea_array, text_array
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

T = TypeVar("T")

log = logging.getLogger("agentskit_chat.storage.postgresql")

KEEP_BEYOND_HISTORY: Final = "AK001"
"""The SQLSTATE `save_session` raises when `history.keep` exceeds the stored history."""
MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (
        """CREATE TABLE sessions (
            tenant text NOT NULL,
            session_id text NOT NULL,
            definition_id text NOT NULL,
            revision bigint NOT NULL,
            history_mode text NOT NULL,
            cursor bigint NOT NULL,
            record bytea NOT NULL,
            updated_at_ms bigint NOT NULL,
            incarnation text NOT NULL,
            PRIMARY KEY (tenant, session_id)
        )""",
        # Content is UTF-8 in bytea: text columns cannot hold NUL characters.
        """CREATE TABLE messages (
            tenant text NOT NULL,
            session_id text NOT NULL,
            position integer NOT NULL,
            message_id text NOT NULL,
            role text NOT NULL,
            content bytea NOT NULL,
            PRIMARY KEY (tenant, session_id, position),
            FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, session_id)
                ON DELETE CASCADE
        )""",
        # A turn's commit in one round trip: the conditional update, then its history change.
        f"""CREATE FUNCTION save_session(
            p_tenant text, p_session_id text, p_definition_id text, p_revision bigint,
            p_history_mode text, p_cursor bigint, p_record bytea, p_updated_at_ms bigint,
            p_expected_cursor bigint, p_incarnation text,
            p_keep integer, p_ids text[], p_roles text[], p_contents bytea[]
        ) RETURNS boolean LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE sessions SET definition_id = p_definition_id, revision = p_revision,
                history_mode = p_history_mode, cursor = p_cursor, record = p_record,
                updated_at_ms = p_updated_at_ms
            WHERE tenant = p_tenant AND session_id = p_session_id
                AND cursor = p_expected_cursor AND incarnation = p_incarnation;
            IF NOT FOUND THEN
                RETURN false;
            END IF;
            DELETE FROM messages
            WHERE tenant = p_tenant AND session_id = p_session_id AND position >= p_keep;
            IF p_keep > 0 AND NOT EXISTS (
                SELECT 1 FROM messages
                WHERE tenant = p_tenant AND session_id = p_session_id AND position = p_keep - 1
            ) THEN
                RAISE EXCEPTION USING ERRCODE = '{KEEP_BEYOND_HISTORY}',
                    MESSAGE = 'history.keep exceeds the number of stored messages';
            END IF;
            INSERT INTO messages (tenant, session_id, position, message_id, role, content)
            SELECT p_tenant, p_session_id, p_keep + added.n - 1, added.id, added.role,
                added.content
            FROM unnest(p_ids, p_roles, p_contents) WITH ORDINALITY
                AS added (id, role, content, n);
            RETURN true;
        END
        $$""",
    ),
    turns.MIGRATION,
    (
        # JSON text (escaped control characters, so never a NUL): a text column holds it.
        "ALTER TABLE messages ADD COLUMN tools text NOT NULL DEFAULT ''",
        # The first migration's function, plus each appended message's tool data.
        f"""CREATE FUNCTION save_session(
            p_tenant text, p_session_id text, p_definition_id text, p_revision bigint,
            p_history_mode text, p_cursor bigint, p_record bytea, p_updated_at_ms bigint,
            p_expected_cursor bigint, p_incarnation text,
            p_keep integer, p_ids text[], p_roles text[], p_contents bytea[], p_tools text[]
        ) RETURNS boolean LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE sessions SET definition_id = p_definition_id, revision = p_revision,
                history_mode = p_history_mode, cursor = p_cursor, record = p_record,
                updated_at_ms = p_updated_at_ms
            WHERE tenant = p_tenant AND session_id = p_session_id
                AND cursor = p_expected_cursor AND incarnation = p_incarnation;
            IF NOT FOUND THEN
                RETURN false;
            END IF;
            DELETE FROM messages
            WHERE tenant = p_tenant AND session_id = p_session_id AND position >= p_keep;
            IF p_keep > 0 AND NOT EXISTS (
                SELECT 1 FROM messages
                WHERE tenant = p_tenant AND session_id = p_session_id AND position = p_keep - 1
            ) THEN
                RAISE EXCEPTION USING ERRCODE = '{KEEP_BEYOND_HISTORY}',
                    MESSAGE = 'history.keep exceeds the number of stored messages';
            END IF;
            INSERT INTO messages (tenant, session_id, position, message_id, role, content, tools)
            SELECT p_tenant, p_session_id, p_keep + added.n - 1, added.id, added.role,
                added.content, added.tools
            FROM unnest(p_ids, p_roles, p_contents, p_tools) WITH ORDINALITY
                AS added (id, role, content, tools, n);
            RETURN true;
        END
        $$""",
    ),
    published.MIGRATION,
)
"""Schema changes, oldest first; entry n - 1 migrates version n - 1 to version n."""
SCHEMA_VERSION: Final = len(MIGRATIONS)
MIGRATION_LOCK: Final = 0x61676B63  # "agkc": one advisory lock id for every migration
DEFAULT_POOL_SIZE: Final = 8
DEFAULT_TIMEOUT: Final = 5.0
"""Seconds to wait for a connection before a call fails as unavailable, unless the URL sets
libpq's `connect_timeout`, which then applies to both."""

_VERSION_TABLE: Final = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""
_INSERT_SESSION: Final = (
    "WITH inserted AS (INSERT INTO sessions (tenant, session_id, definition_id, revision,"
    " history_mode, cursor, record, updated_at_ms, incarnation)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (tenant, session_id) DO NOTHING RETURNING 1)"
    f" SELECT {turns.NOTIFY_IF_WAITED} FROM inserted"
)
"""Each session write notifies its topic in the same statement: one row when it wrote."""
_SELECT_SESSION: Final = (
    "SELECT session_id, definition_id, revision, history_mode, cursor, record,"
    " updated_at_ms, incarnation, tenant FROM sessions WHERE tenant = %s AND session_id = %s"
)
_UPDATE_SESSION: Final = (
    "WITH changed AS (UPDATE sessions SET definition_id = %s, revision = %s,"
    " history_mode = %s, cursor = %s, record = %s, updated_at_ms = %s"
    " WHERE tenant = %s AND session_id = %s AND cursor = %s AND incarnation = %s RETURNING 1)"
    f" SELECT {turns.NOTIFY_IF_WAITED} FROM changed"
)
_SAVE_SESSION: Final = (
    "SELECT saved.ok FROM save_session(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
    " %s::text[], %s::text[], %s::bytea[], %s::text[]) AS saved (ok)"
    " LEFT JOIN LATERAL (SELECT pg_notify(%s, topic) FROM wake_interest"
    " WHERE saved.ok AND topic = %s) AS woken ON true"
)
_DELETE_SESSION: Final = (
    "WITH deleted AS (DELETE FROM sessions WHERE tenant = %s AND session_id = %s RETURNING 1)"
    f", {turns.DELETE_SESSION_EVENTS} SELECT {turns.NOTIFY_IF_WAITED} FROM deleted"
)
_DELETE_SESSION_AT: Final = (
    "WITH deleted AS (DELETE FROM sessions WHERE tenant = %s AND session_id = %s"
    f" AND cursor = %s RETURNING 1), {turns.DELETE_SESSION_EVENTS}"
    f" SELECT {turns.NOTIFY_IF_WAITED} FROM deleted"
)
_SELECT_SESSION_WITH_MESSAGES: Final = (
    "SELECT s.session_id, s.definition_id, s.revision, s.history_mode, s.cursor, s.record,"
    " s.updated_at_ms, s.incarnation, s.tenant, m.ids, m.roles, m.contents, m.tools"
    " FROM sessions s"
    " LEFT JOIN LATERAL (SELECT array_agg(message_id ORDER BY position) AS ids,"
    " array_agg(role ORDER BY position) AS roles,"
    " array_agg(content ORDER BY position) AS contents,"
    " array_agg(tools ORDER BY position) AS tools FROM messages"
    " WHERE tenant = s.tenant AND session_id = s.session_id) m ON true"
    " WHERE s.tenant = %s AND s.session_id = %s"
)
"""The session and its messages in one statement, so in one snapshot."""
_SELECT_MESSAGES: Final = (
    "SELECT message_id, role, content, tools FROM messages"
    " WHERE tenant = %s AND session_id = %s ORDER BY position"
)


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
        self._conninfo = conninfo(url, password=password)
        parameters = conninfo_to_dict(self._conninfo)
        self._secret = password or str(parameters.get("password") or "")
        if timeout is None:
            timeout = _connect_timeout(parameters) or DEFAULT_TIMEOUT
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self._timeout = timeout
        self._pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            self._conninfo,
            connection_class=Connection,
            kwargs={"autocommit": True},
            min_size=1,
            max_size=pool_size,
            open=False,
            timeout=timeout,
            name="agentskit-chat",
            reconnect_timeout=3600.0,
        )
        self._checking: asyncio.Task[None] | None = None
        self._wakeups = Wakeups()
        self._interest = turns.Interest()
        self._listener = turns.Listener(
            self._conninfo,
            timeout=timeout,
            wakeups=self._wakeups,
            describe=lambda error: describe(error, self._secret),
        )
        self._opened = False
        self._closed = False

    async def open(self, *, migrate: bool = False) -> None:
        """Connect, migrate the schema when `migrate` is set, check its version, and
        start the pool. StoreUnavailableError when any of it fails."""
        if self._closed:
            raise StoreUnavailableError("the postgresql store is closed")
        if self._opened:
            return
        connection = await self._connect_once()
        try:
            async with connection:
                if migrate:
                    await _migrate(connection)
                await _check_version(connection)
        except psycopg.Error as exc:
            raise self._unavailable("open", exc) from exc
        try:
            await self._pool.open(wait=True, timeout=self._timeout)
        except (psycopg.Error, PoolTimeout) as exc:
            raise self._unavailable("open", exc) from exc
        self._opened = True

    async def migrate(self) -> tuple[int, int]:
        """Apply the missing migrations; (version before, version after)."""
        if self._closed:
            raise StoreUnavailableError("the postgresql store is closed")
        connection = await self._connect_once()
        try:
            async with connection:
                return await _migrate(connection)
        except psycopg.Error as exc:
            raise self._unavailable("migrate", exc) from exc

    async def create(self, session: StoredSession) -> None:
        """Insert a new session; raises SessionExistsError when its tenant has the id."""
        row = (
            session.tenant,
            session.session_id,
            session.definition_id,
            session.revision,
            str(session.history_mode),
            session.cursor,
            bytes(session.record),
            session.updated_at_ms,
            session.incarnation,
            NOTIFY_CHANNEL,
            session_topic(session.tenant, session.session_id),
        )

        async def insert(db: Connection) -> bool:
            return (await db.session_cursor().execute(_INSERT_SESSION, row)).rowcount == 1

        if not await self._write("create", insert):
            raise SessionExistsError("a session with this id already exists")

    async def load(self, session_id: str, *, tenant: str = DEFAULT_TENANT) -> StoredSession | None:
        """The tenant's stored session, or None."""
        async with self._connection("load") as db:
            found = await db.session_cursor().execute(_SELECT_SESSION, (tenant, session_id))
            row = await found.fetchone()
        return None if row is None else _session(row)

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
        update = (
            session.definition_id,
            session.revision,
            str(session.history_mode),
            session.cursor,
            bytes(session.record),
            session.updated_at_ms,
            session.tenant,
            session.session_id,
            expected_cursor,
            session.incarnation,
        )
        wake = (NOTIFY_CHANNEL, session_topic(session.tenant, session.session_id))
        if history is None:

            async def replace(db: Connection) -> bool:
                done = await db.session_cursor().execute(_UPDATE_SESSION, update + wake)
                return done.rowcount == 1

            return await self._write("compare_and_set", replace)
        save = (
            session.tenant,
            session.session_id,
            *update[:6],
            expected_cursor,
            session.incarnation,
            history.keep,
            text_array([m.message_id for m in history.append]),
            text_array([m.role for m in history.append]),
            bytea_array([m.content.encode() for m in history.append]),
            text_array([m.tools for m in history.append]),
            *wake,
        )

        async def replace_with_history(db: Connection) -> bool:
            try:
                row = await (await db.session_cursor().execute(_SAVE_SESSION, save)).fetchone()
            except psycopg.Error as exc:
                if exc.sqlstate == KEEP_BEYOND_HISTORY:
                    raise ValueError("history.keep exceeds the number of stored messages") from None
                raise
            return row is not None and row[0] is True

        return await self._write("compare_and_set", replace_with_history)

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

        async def remove(db: AsyncConnection[Any]) -> bool:
            if expected_cursor is None:
                row = (tenant, session_id, tenant, session_id, *wake)
                done = await db.execute(_DELETE_SESSION, row)
            else:
                at = (tenant, session_id, expected_cursor, tenant, session_id, *wake)
                done = await db.execute(_DELETE_SESSION_AT, at)
            return done.rowcount == 1

        return await self._write("delete", remove)

    async def list_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> Sequence[StoredMessage]:
        """The session's messages, oldest first, as a tuple; empty when there are none."""
        async with self._connection("list_messages") as db:
            rows = await (await db.execute(_SELECT_MESSAGES, (tenant, session_id))).fetchall()
        try:
            return tuple(
                StoredMessage(row[0], row[1], bytes(row[2]).decode(), row[3]) for row in rows
            )
        except UnicodeDecodeError:
            raise StoreCorruptError("a stored message is not valid UTF-8") from None

    async def load_with_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> tuple[StoredSession, tuple[StoredMessage, ...]] | None:
        """The tenant's session and its messages, read by one statement (one snapshot,
        whatever commits meanwhile); None when missing."""
        async with self._connection("load_with_messages") as db:
            found = await db.session_cursor().execute(
                _SELECT_SESSION_WITH_MESSAGES, (tenant, session_id)
            )
            row = await found.fetchone()
        if row is None:
            return None
        ids, roles, contents, tools = row[9] or (), row[10] or (), row[11] or (), row[12] or ()
        if not len(ids) == len(roles) == len(contents) == len(tools):
            raise StoreCorruptError("stored messages cannot be read back")
        try:
            messages = tuple(
                StoredMessage(i, r, bytes(c).decode(), t)
                for i, r, c, t in zip(ids, roles, contents, tools, strict=True)
            )
        except UnicodeDecodeError:
            raise StoreCorruptError("a stored message is not valid UTF-8") from None
        return _session(row), messages

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

        return await self._write("append_events", append)

    async def read_events(
        self, key: TurnKey, after: int = 0, *, now_ms: int = 0
    ) -> tuple[EventBatch, ...]:
        """The turn's stored batches holding a sequence after `after`, in order, but for
        those expired at `now_ms`."""
        turn = (key.tenant, key.session_id, key.turn_id, after, now_ms)
        async with self._connection("read_events") as db:
            rows = await (await db.execute(turns.SELECT_EVENTS, turn)).fetchall()
        return tuple(turns.batch_of_row(row) for row in rows)

    async def newest_run(self, tenant: str, session_id: str, turn_id: str) -> str | None:
        """The name of the newest stored run of `turn_id`, or None."""
        prefix = f"{turn_id}@"
        async with self._connection("newest_run") as db:
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

        await self._write("send_signal", send)

    async def take_signals(self, holder: str) -> tuple[TurnSignal, ...]:
        """Remove and return the signals left for `holder`, oldest first."""

        async def take(db: AsyncConnection[Any]) -> list[tuple[Any, ...]]:
            return await (await db.execute(turns.TAKE_SIGNALS, {"holder": holder})).fetchall()

        rows = sorted(await self._write("take_signals", take), key=lambda row: row[0] or 0)
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

        return await self._write("expire", expire)

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

        await self._write("publish_definitions", write)

    async def published_definition(
        self, definition_id: str, revision: int, *, now_ms: int
    ) -> FoundDefinition | None:
        """The document of a revision some unexpired row names, or None."""
        async with self._connection("published_definition") as db:
            return await published.find(db, definition_id, revision, now_ms)

    async def wait(self, topics: Collection[str], timeout: float) -> None:
        """Return when one of `topics` may have changed, or after `timeout` seconds.

        The first call opens the store's listening connection. While it is not listening
        (not yet, or after it broke) waits run to their timeouts; each time it starts
        listening every waiter is woken. A topic this store did not wait on lately is
        registered first (one statement), and the call returns at once; a registration
        that fails shortens the wait instead. Raises StoreUnavailableError only when the
        store is closed or not open."""
        if self._closed or not self._opened:
            raise StoreUnavailableError(
                "the postgresql store is closed"
                if self._closed
                else "the postgresql store is not open"
            )
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

        await self._write("wait", register)

    async def close(self) -> None:
        """Close every connection and wake every waiter. Idempotent; later calls raise
        StoreUnavailableError."""
        if self._closed:
            return
        self._closed = True
        self._wakeups.notify_all()
        checking, self._checking = self._checking, None
        if checking is not None:
            checking.cancel()
        await self._listener.close()
        await self._pool.close()

    async def _write(self, operation: str, work: Callable[[Connection], Awaitable[T]]) -> T:
        """Run `work` whole even when the caller is cancelled: a write that reached the
        server completes, and its connection goes back to the pool in a known state."""

        async def whole() -> T:
            async with self._connection(operation) as db:
                return await work(db)

        task = asyncio.ensure_future(whole())
        task.add_done_callback(_retrieve)
        return await asyncio.shield(task)

    def _connection(self, operation: str) -> Checkout:
        if self._closed or not self._opened:
            raise StoreUnavailableError(
                "the postgresql store is closed"
                if self._closed
                else "the postgresql store is not open"
            )
        return Checkout(self._pool, operation, self._failure)

    def _failure(self, operation: str, error: BaseException, server: bool) -> StoreUnavailableError:
        if server and isinstance(error, psycopg.OperationalError):
            self._check_idle_connections()
        return self._unavailable(operation, error)

    def _check_idle_connections(self) -> None:
        """After a connection failure (a server restart breaks every pooled connection),
        test the idle ones in the background, so that few calls meet a dead one."""
        if self._checking is not None or self._closed:
            return

        async def check() -> None:
            try:
                await self._pool.check()
            except Exception:  # The next failure checks again.
                log.debug("checking pooled connections failed", exc_info=True)
            finally:
                self._checking = None

        self._checking = asyncio.ensure_future(check())

    async def _connect_once(self) -> AsyncConnection[Any]:
        try:
            return await AsyncConnection.connect(
                self._conninfo, autocommit=True, connect_timeout=max(1, round(self._timeout))
            )
        except psycopg.Error as exc:
            raise self._unavailable("connect", exc, detail=True) from exc

    def _unavailable(
        self, operation: str, error: BaseException, *, detail: bool = False
    ) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"postgresql store {operation} failed: {describe(error, self._secret, detail=detail)}"
        )


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


def conninfo(url: str, *, password: str | None = None) -> str:
    """The libpq connection string of `url` plus `password`; ValueError, quoting neither,
    when `url` is not a valid PostgreSQL URL."""
    try:
        parsed = conninfo_to_dict(url)
        if password is not None:
            parsed["password"] = password
        return make_conninfo("", **parsed)
    except psycopg.Error:
        raise ValueError("the postgresql store URL is not a valid libpq connection URI") from None


def describe(error: BaseException, secret: str | None = None, *, detail: bool = False) -> str:
    """A safe one-line description of `error`: its class and SQLSTATE.

    With `detail`, the first line of a connection failure's message is added (libpq names
    the host, port, user and database there, never the password; `secret` is masked anyway).
    """
    text = type(error).__name__
    sqlstate = getattr(error, "sqlstate", None)
    if sqlstate:
        text += f" (SQLSTATE {sqlstate})"
    if detail:
        message = str(error).strip().splitlines()
        if message:
            text += f": {message[0].strip()}"
    if secret:
        text = text.replace(secret, "***")
    return text


def _connect_timeout(parameters: dict[str, Any]) -> float | None:
    try:
        value = float(parameters.get("connect_timeout") or 0)
    except ValueError:
        raise ValueError(
            "the postgresql store URL has a connect_timeout that is no number"
        ) from None
    return value if value > 0 else None


async def _migrate(db: AsyncConnection[Any]) -> tuple[int, int]:
    async with db.transaction():
        await db.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await db.execute(_VERSION_TABLE)
        before = await _version(db)
        _refuse_newer(before)
        for version in range(before + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version - 1]:
                await db.execute(statement)
            await db.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
            log.info("postgresql store migrated to schema version %d", version)
    return before, max(before, SCHEMA_VERSION)


async def _check_version(db: AsyncConnection[Any]) -> None:
    found = await (await db.execute("SELECT to_regclass('schema_migrations')")).fetchone()
    if found is None or found[0] is None:
        raise StoreUnavailableError(
            "the postgresql store has no schema; run `agentskit-chat migrate` (or serve --migrate)"
        )
    version = await _version(db)
    _refuse_newer(version)
    if version < SCHEMA_VERSION:
        raise StoreUnavailableError(
            f"the postgresql store has schema version {version}, older than version"
            f" {SCHEMA_VERSION}; run `agentskit-chat migrate` (or serve --migrate)"
        )


async def _version(db: AsyncConnection[Any]) -> int:
    row = await (
        await db.execute("SELECT coalesce(max(version), 0) FROM schema_migrations")
    ).fetchone()
    return int(row[0]) if row is not None else 0


def _refuse_newer(version: int) -> None:
    if version > SCHEMA_VERSION:
        raise StoreUnavailableError(
            f"the postgresql store has schema version {version}, newer than the supported"
            f" version {SCHEMA_VERSION}; upgrade agentskit-chat"
        )


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a write's outcome as seen: a caller that was cancelled no longer awaits it."""
    if not task.cancelled():
        task.exception()


def _session(row: tuple[Any, ...]) -> StoredSession:
    try:
        history_mode = HistoryMode(row[3])
    except ValueError:
        raise StoreCorruptError("a stored session has an unknown history mode") from None
    return StoredSession(
        session_id=row[0],
        definition_id=row[1],
        revision=row[2],
        history_mode=history_mode,
        cursor=row[4],
        record=bytes(row[5]),
        updated_at_ms=row[6],
        incarnation=row[7],
        tenant=row[8],
    )
