"""PostgreSQL statements of sessions and their messages (see postgresql.py): the parameters
of each write, built before it is sent, the statements run on a pooled connection, and the
decoding of the rows they read."""

from __future__ import annotations

import hashlib
from typing import Any, Final

import psycopg
from psycopg import AsyncConnection

from . import _postgresql_turns as turns
from ._ports import (
    HistoryChange,
    HistoryMode,
    StoreCorruptError,
    StoredMessage,
    StoredSession,
)
from ._postgresql_pool import Connection, bytea_array, text_array
from ._postgresql_schema import KEEP_BEYOND_HISTORY
from ._postgresql_turns import NOTIFY_CHANNEL
from ._turn_events import session_topic

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
_UPDATE_HELD_SESSION: Final = (
    "WITH changed AS (UPDATE sessions SET definition_id = %s, revision = %s,"
    " history_mode = %s, cursor = %s, record = %s, updated_at_ms = %s"
    " WHERE tenant = %s AND session_id = %s AND cursor = %s AND incarnation = %s"
    " AND record_digest = %s RETURNING 1)"
    f" SELECT {turns.NOTIFY_IF_WAITED} FROM changed"
)
"""`_UPDATE_SESSION` of a record the writer holds without reading it: the stored record's
digest (column `record_digest`, which the server computes) must be that of the held bytes."""
_SAVE_SESSION: Final = (
    "SELECT saved.ok FROM save_session(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
    " %s::text[], %s::text[], %s::bytea[], %s::text[], %s::bytea) AS saved (ok)"
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


def _columns(session: StoredSession) -> tuple[Any, ...]:
    """The columns a write sets: definition, revision, history mode, cursor, record, time."""
    return (
        session.definition_id,
        session.revision,
        str(session.history_mode),
        session.cursor,
        bytes(session.record),
        session.updated_at_ms,
    )


def insert_row(session: StoredSession) -> tuple[Any, ...]:
    """The parameters of `insert`: the new session's columns, then its wake-up."""
    return (
        session.tenant,
        session.session_id,
        *_columns(session),
        session.incarnation,
        NOTIFY_CHANNEL,
        session_topic(session.tenant, session.session_id),
    )


async def insert(row: tuple[Any, ...], db: Connection) -> bool:
    """Insert a session (parameters from `insert_row`); False when its tenant has the id."""
    return (await db.session_cursor().execute(_INSERT_SESSION, row)).rowcount == 1


async def select_session(db: Connection, tenant: str, session_id: str) -> tuple[Any, ...] | None:
    """The row of the tenant's session (for `session_of_row`), or None."""
    found = await db.session_cursor().execute(_SELECT_SESSION, (tenant, session_id))
    return await found.fetchone()


def record_digest(record: bytes) -> bytes:
    """What column `record_digest` holds for `record`: its SHA-256, as the server computes it."""
    return hashlib.sha256(record).digest()


def update_row(
    session: StoredSession, expected_cursor: int, expected_record: bytes | None = None
) -> tuple[str, tuple[Any, ...]]:
    """The statement and parameters of `update`: the session's new columns, its key and
    expected cursor and incarnation (and the digest of `expected_record`, when given), then
    its wake-up."""
    row: tuple[Any, ...] = (
        *_columns(session),
        session.tenant,
        session.session_id,
        expected_cursor,
        session.incarnation,
    )
    statement = _UPDATE_SESSION
    if expected_record is not None:
        statement, row = _UPDATE_HELD_SESSION, (*row, record_digest(expected_record))
    return statement, (*row, NOTIFY_CHANNEL, session_topic(session.tenant, session.session_id))


async def update(statement: str, row: tuple[Any, ...], db: Connection) -> bool:
    """Compare-and-set without a history change (statement and parameters from
    `update_row`)."""
    done = await db.session_cursor().execute(statement, row)
    return done.rowcount == 1


def save_row(
    session: StoredSession,
    expected_cursor: int,
    history: HistoryChange,
    expected_record: bytes | None = None,
) -> tuple[Any, ...]:
    """The parameters of `save`: those of function `save_session`, then the wake-up."""
    return (
        session.tenant,
        session.session_id,
        *_columns(session),
        expected_cursor,
        session.incarnation,
        history.keep,
        text_array([m.message_id for m in history.append]),
        text_array([m.role for m in history.append]),
        bytea_array([m.content.encode() for m in history.append]),
        text_array([m.tools for m in history.append]),
        None if expected_record is None else record_digest(expected_record),
        NOTIFY_CHANNEL,
        session_topic(session.tenant, session.session_id),
    )


async def save(row: tuple[Any, ...], db: Connection) -> bool:
    """Compare-and-set with a history change (parameters from `save_row`); ValueError when
    `history.keep` exceeds the stored history."""
    try:
        found = await (await db.session_cursor().execute(_SAVE_SESSION, row)).fetchone()
    except psycopg.Error as exc:
        if exc.sqlstate == KEEP_BEYOND_HISTORY:
            raise ValueError("history.keep exceeds the number of stored messages") from None
        raise
    return found is not None and found[0] is True


async def delete(
    tenant: str,
    session_id: str,
    expected_cursor: int | None,
    wake: tuple[str, str],
    db: AsyncConnection[Any],
) -> bool:
    """Delete the tenant's session (at `expected_cursor`, unless None) and its turns' events,
    waking `wake` (channel, topic); False when nothing was deleted."""
    if expected_cursor is None:
        row = (tenant, session_id, tenant, session_id, *wake)
        done = await db.execute(_DELETE_SESSION, row)
    else:
        at = (tenant, session_id, expected_cursor, tenant, session_id, *wake)
        done = await db.execute(_DELETE_SESSION_AT, at)
    return done.rowcount == 1


async def select_messages(
    db: AsyncConnection[Any], tenant: str, session_id: str
) -> list[tuple[Any, ...]]:
    """The rows of the session's messages, oldest first (for `messages_of_rows`)."""
    return await (await db.execute(_SELECT_MESSAGES, (tenant, session_id))).fetchall()


def messages_of_rows(rows: list[tuple[Any, ...]]) -> tuple[StoredMessage, ...]:
    try:
        return tuple(StoredMessage(row[0], row[1], bytes(row[2]).decode(), row[3]) for row in rows)
    except UnicodeDecodeError:
        raise StoreCorruptError("a stored message is not valid UTF-8") from None


async def select_with_messages(
    db: Connection, tenant: str, session_id: str
) -> tuple[Any, ...] | None:
    """The row of the tenant's session with its messages (for `with_messages_of_row`), read
    by one statement, or None."""
    found = await db.session_cursor().execute(_SELECT_SESSION_WITH_MESSAGES, (tenant, session_id))
    return await found.fetchone()


def with_messages_of_row(row: tuple[Any, ...]) -> tuple[StoredSession, tuple[StoredMessage, ...]]:
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
    return session_of_row(row), messages


def session_of_row(row: tuple[Any, ...]) -> StoredSession:
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
