"""The SQLite store's schema (see sqlite.py): its CREATE statements, SCHEMA_VERSION kept in
`PRAGMA user_version`, the statements that bring each older version to it, and `migrate`,
which every connection runs when it opens."""

from __future__ import annotations

import sqlite3
from typing import Final

from . import _sqlite_definitions as published
from . import _sqlite_turns as turns
from ._ports import StoreUnavailableError

SCHEMA_VERSION: Final = 5

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


def migrate(db: sqlite3.Connection) -> None:
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


def _user_version(db: sqlite3.Connection) -> int:
    (version,) = db.execute("PRAGMA user_version").fetchone()
    return int(version)
