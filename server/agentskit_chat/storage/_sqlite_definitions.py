"""SQLite statements of published definitions (see sqlite.py and _published.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Final

from ._ports import StoreCorruptError
from ._published import FoundDefinition, PublishedDefinition

DEFINITION_TABLES: Final = (
    """CREATE TABLE published_definitions (
        publisher TEXT NOT NULL,
        definition_id TEXT NOT NULL,
        revision INTEGER NOT NULL,
        document TEXT NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        PRIMARY KEY (publisher, definition_id, revision)
    )""",
    "CREATE INDEX published_definitions_revision"
    " ON published_definitions (definition_id, revision, expires_at_ms)",
)
_WITHDRAW: Final = "DELETE FROM published_definitions WHERE publisher = ? OR expires_at_ms <= ?"
_PUBLISH: Final = (
    "INSERT INTO published_definitions (publisher, definition_id, revision, document,"
    " expires_at_ms) VALUES (?, ?, ?, ?, ?)"
)
_FIND: Final = (
    "SELECT document, expires_at_ms FROM published_definitions"
    " WHERE definition_id = ? AND revision = ? AND expires_at_ms > ?"
    " ORDER BY expires_at_ms DESC LIMIT 1"
)


def publish(
    publisher: str,
    definitions: Sequence[PublishedDefinition],
    expires_at_ms: int,
    now_ms: int,
    db: sqlite3.Connection,
) -> None:
    db.execute("BEGIN IMMEDIATE")
    db.execute(_WITHDRAW, (publisher, now_ms))
    db.executemany(
        _PUBLISH,
        [(publisher, d.definition_id, d.revision, d.document, expires_at_ms) for d in definitions],
    )
    db.execute("COMMIT")


def find(
    definition_id: str, revision: int, now_ms: int, db: sqlite3.Connection
) -> FoundDefinition | None:
    return found_of_row(db.execute(_FIND, (definition_id, revision, now_ms)).fetchone())


def found_of_row(row: tuple[object, ...] | None) -> FoundDefinition | None:
    """The FoundDefinition of a (document, expires_at_ms) row; None for no row."""
    if row is None:
        return None
    document, expires_at_ms = row
    if not isinstance(document, str) or type(expires_at_ms) is not int:
        raise StoreCorruptError("a published definition cannot be read back")
    return FoundDefinition(document, expires_at_ms)
