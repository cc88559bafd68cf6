"""The PostgreSQL store's schema (see postgresql.py): MIGRATIONS, whose entry n - 1 brings a
database from version n - 1 to n, SCHEMA_VERSION, table `schema_migrations` that records
each applied version, `migrate` under an advisory lock, and `check_version`, which refuses
a database of another version."""

from __future__ import annotations

import logging
from typing import Any, Final

from psycopg import AsyncConnection

from . import _postgresql_definitions as published
from . import _postgresql_turns as turns
from ._ports import StoreUnavailableError

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
    (
        # The record's digest, computed by the server on every insert and update of the
        # row, whoever writes it (the rows stored before get theirs now): a write that did
        # not read the record compares it instead of the record (`save_session` below,
        # `_postgresql_sessions._UPDATE_HELD_SESSION`).
        "ALTER TABLE sessions ADD COLUMN record_digest bytea"
        " GENERATED ALWAYS AS (sha256(record)) STORED",
        # The third migration's function, plus the digest the stored record must have
        # (NULL: any).
        f"""CREATE FUNCTION save_session(
            p_tenant text, p_session_id text, p_definition_id text, p_revision bigint,
            p_history_mode text, p_cursor bigint, p_record bytea, p_updated_at_ms bigint,
            p_expected_cursor bigint, p_incarnation text,
            p_keep integer, p_ids text[], p_roles text[], p_contents bytea[], p_tools text[],
            p_expected_digest bytea
        ) RETURNS boolean LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE sessions SET definition_id = p_definition_id, revision = p_revision,
                history_mode = p_history_mode, cursor = p_cursor, record = p_record,
                updated_at_ms = p_updated_at_ms
            WHERE tenant = p_tenant AND session_id = p_session_id
                AND cursor = p_expected_cursor AND incarnation = p_incarnation
                AND (p_expected_digest IS NULL OR record_digest = p_expected_digest);
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
)
"""Schema changes, oldest first; entry n - 1 migrates version n - 1 to version n."""
SCHEMA_VERSION: Final = len(MIGRATIONS)
MIGRATION_LOCK: Final = 0x61676B63  # "agkc": one advisory lock id for every migration

_VERSION_TABLE: Final = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""


async def migrate(db: AsyncConnection[Any]) -> tuple[int, int]:
    """Apply the missing migrations in one transaction; (version before, version after)."""
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


async def check_version(db: AsyncConnection[Any]) -> None:
    """StoreUnavailableError unless the database has version SCHEMA_VERSION."""
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
