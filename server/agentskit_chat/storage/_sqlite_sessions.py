"""SQLite statements of sessions and their messages (see sqlite.py): each function runs on
the connection it is given, last argument, and decodes the rows it reads."""

from __future__ import annotations

import sqlite3
from typing import Final

from . import _sqlite_turns as turns
from ._ports import (
    HistoryChange,
    HistoryMode,
    StoreCorruptError,
    StoredMessage,
    StoredSession,
)

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
_UPDATE_HELD_SESSION: Final = f"{_UPDATE_SESSION} AND record = ?"
"""The update of a record the writer holds without reading it: the stored bytes are the
condition's digest, compared in place (SQLite has no hash function of its own)."""
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


def create(session: StoredSession, db: sqlite3.Connection) -> bool:
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


def load(tenant: str, session_id: str, db: sqlite3.Connection) -> StoredSession | None:
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


def compare_and_set(
    session: StoredSession,
    expected_cursor: int,
    history: HistoryChange | None,
    expected_record: bytes | None,
    db: sqlite3.Connection,
) -> bool:
    tenant, session_id = session.tenant, session.session_id
    statement = _UPDATE_SESSION
    update: tuple[object, ...] = (
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
    if expected_record is not None:
        statement, update = _UPDATE_HELD_SESSION, (*update, expected_record)
    if history is None:
        return db.execute(statement, update).rowcount == 1
    keep = history.keep
    db.execute("BEGIN IMMEDIATE")
    if db.execute(statement, update).rowcount != 1:
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


def delete(
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


def list_messages(
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


def load_with_messages(
    tenant: str, session_id: str, db: sqlite3.Connection
) -> tuple[StoredSession, tuple[StoredMessage, ...]] | None:
    db.execute("BEGIN")  # deferred: one read snapshot for both statements, no write lock
    stored = load(tenant, session_id, db)
    messages = () if stored is None else list_messages(tenant, session_id, db)
    db.execute("COMMIT")
    return None if stored is None else (stored, messages)
