"""SQLite statements of live turns: event batches and signals (see sqlite.py)."""

from __future__ import annotations

import sqlite3
from typing import Final

from ._ports import StoreCorruptError
from ._turn_events import EXPIRE_LIMIT, EventBatch, SignalKind, TurnKey, TurnSignal, newest_run

TURN_TABLES: Final = (
    """CREATE TABLE turn_events (
        tenant TEXT NOT NULL,
        session_id TEXT NOT NULL,
        turn_id TEXT NOT NULL,
        first_sequence INTEGER NOT NULL,
        last_sequence INTEGER NOT NULL,
        final INTEGER NOT NULL,
        body BLOB NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        PRIMARY KEY (tenant, session_id, turn_id, first_sequence)
    )""",
    "CREATE INDEX turn_events_expiry ON turn_events (expires_at_ms)",
    # The rowid orders a holder's signals: a repeated signal keeps its row (and place).
    """CREATE TABLE turn_signals (
        holder TEXT NOT NULL,
        kind TEXT NOT NULL,
        tenant TEXT NOT NULL,
        session_id TEXT NOT NULL,
        turn_id TEXT NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        UNIQUE (holder, kind, tenant, session_id, turn_id)
    )""",
    "CREATE INDEX turn_signals_expiry ON turn_signals (expires_at_ms)",
)

_EVENTS_REFUSED: Final = (
    "SELECT 1 FROM turn_events WHERE tenant = ? AND session_id = ? AND turn_id = ?"
    " AND (final <> 0 OR (first_sequence <= ? AND last_sequence >= ?)"
    " OR (? AND first_sequence > ?)) LIMIT 1"
)
_INSERT_EVENTS: Final = (
    "INSERT INTO turn_events (tenant, session_id, turn_id, first_sequence, last_sequence,"
    " final, body, expires_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT_EVENTS: Final = (
    "SELECT first_sequence, last_sequence, final, body FROM turn_events"
    " WHERE tenant = ? AND session_id = ? AND turn_id = ? AND last_sequence > ?"
    " AND expires_at_ms > ? ORDER BY first_sequence"
)
DELETE_SESSION_EVENTS: Final = "DELETE FROM turn_events WHERE tenant = ? AND session_id = ?"
"""The events of a deleted session's turns (messages go by their foreign key)."""
_SELECT_RUNS: Final = (
    "SELECT DISTINCT turn_id FROM turn_events WHERE tenant = ? AND session_id = ?"
    " AND turn_id >= ? AND turn_id < ?"
)
"""The run names of a turn id: keys from `id@` up to (not including) `idA` (text compares
as bytes: exactly the names that start with `id@`)."""
_INSERT_SIGNAL: Final = (
    "INSERT INTO turn_signals (holder, kind, tenant, session_id, turn_id, expires_at_ms)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (holder, kind, tenant, session_id, turn_id)"
    " DO UPDATE SET expires_at_ms = max(expires_at_ms, excluded.expires_at_ms)"
)
_HAS_SIGNALS: Final = "SELECT 1 FROM turn_signals WHERE holder = ? LIMIT 1"
_TAKE_SIGNALS: Final = (
    "DELETE FROM turn_signals WHERE holder = ? RETURNING rowid, kind, tenant, session_id, turn_id"
)
_EXPIRE_EVENTS: Final = (
    "DELETE FROM turn_events WHERE rowid IN (SELECT rowid FROM turn_events"
    f" WHERE expires_at_ms <= ? LIMIT {EXPIRE_LIMIT})"
)
_EXPIRE_SIGNALS: Final = (
    "DELETE FROM turn_signals WHERE rowid IN (SELECT rowid FROM turn_signals"
    f" WHERE expires_at_ms <= ? LIMIT {EXPIRE_LIMIT})"
)


def append_events(
    key: TurnKey, batch: EventBatch, expires_at_ms: int, db: sqlite3.Connection
) -> bool:
    turn = (key.tenant, key.session_id, key.turn_id)
    db.execute("BEGIN IMMEDIATE")
    refused = (*turn, batch.last, batch.first, batch.final, batch.last)
    if db.execute(_EVENTS_REFUSED, refused).fetchone() is not None:
        db.execute("ROLLBACK")
        return False
    row = (*turn, batch.first, batch.last, batch.final, batch.body, expires_at_ms)
    db.execute(_INSERT_EVENTS, row)
    db.execute("COMMIT")
    return True


def read_events(
    key: TurnKey, after: int, now_ms: int, db: sqlite3.Connection
) -> tuple[EventBatch, ...]:
    rows = db.execute(_SELECT_EVENTS, (key.tenant, key.session_id, key.turn_id, after, now_ms))
    return tuple(batch_of_row(row) for row in rows.fetchall())


def newest_run_of(tenant: str, session_id: str, turn_id: str, db: sqlite3.Connection) -> str | None:
    bounds = (f"{turn_id}@", f"{turn_id}A")
    rows = db.execute(_SELECT_RUNS, (tenant, session_id, *bounds)).fetchall()
    return newest_run([name for (name,) in rows if isinstance(name, str)], turn_id)


def batch_of_row(row: tuple[object, ...]) -> EventBatch:
    first, last, final, body = row
    if (
        type(first) is not int
        or type(last) is not int
        or not 1 <= first <= last
        or final not in (0, 1)
        or type(body) is not bytes
    ):
        raise StoreCorruptError("a stored batch of turn events cannot be read back")
    return EventBatch(first, last, body, bool(final))


def send_signal(signal: TurnSignal, expires_at_ms: int, db: sqlite3.Connection) -> None:
    key = signal.key
    row = (signal.holder, str(signal.kind), key.tenant, key.session_id, key.turn_id)
    db.execute(_INSERT_SIGNAL, (*row, expires_at_ms))


def take_signals(holder: str, db: sqlite3.Connection) -> tuple[TurnSignal, ...]:
    if db.execute(_HAS_SIGNALS, (holder,)).fetchone() is None:
        return ()  # the usual answer, without taking the write lock
    db.execute("BEGIN IMMEDIATE")
    rows = sorted(db.execute(_TAKE_SIGNALS, (holder,)).fetchall())
    try:
        taken = tuple(
            TurnSignal(holder, SignalKind(kind), TurnKey(tenant, session_id, turn_id))
            for _, kind, tenant, session_id, turn_id in rows
        )
    except (ValueError, TypeError):
        raise StoreCorruptError("a stored turn signal cannot be read back") from None
    db.execute("COMMIT")
    return taken


def expire(now_ms: int, db: sqlite3.Connection) -> int:
    db.execute("BEGIN IMMEDIATE")
    dropped = db.execute(_EXPIRE_EVENTS, (now_ms,)).rowcount
    dropped += db.execute(_EXPIRE_SIGNALS, (now_ms,)).rowcount
    db.execute("COMMIT")
    return int(dropped)
