"""PostgreSQL statements of published definitions (see postgresql.py and _published.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from psycopg import AsyncConnection

from ._published import FoundDefinition, PublishedDefinition
from ._sqlite_definitions import found_of_row

MIGRATION: Final = (
    """CREATE TABLE published_definitions (
        publisher text NOT NULL,
        definition_id text NOT NULL,
        revision bigint NOT NULL,
        document text NOT NULL,
        expires_at_ms bigint NOT NULL,
        PRIMARY KEY (publisher, definition_id, revision)
    )""",
    "CREATE INDEX published_definitions_revision"
    " ON published_definitions (definition_id, revision, expires_at_ms)",
)
"""Schema version 5: the definitions each process serves, for the others to read."""
_WITHDRAW: Final = "DELETE FROM published_definitions WHERE publisher = %s OR expires_at_ms <= %s"
_PUBLISH: Final = (
    "INSERT INTO published_definitions (publisher, definition_id, revision, document,"
    " expires_at_ms) VALUES (%s, %s, %s, %s, %s)"
)
_FIND: Final = (
    "SELECT document, expires_at_ms FROM published_definitions"
    " WHERE definition_id = %s AND revision = %s AND expires_at_ms > %s"
    " ORDER BY expires_at_ms DESC LIMIT 1"
)


async def publish(
    db: AsyncConnection[Any],
    publisher: str,
    definitions: Sequence[PublishedDefinition],
    expires_at_ms: int,
    now_ms: int,
) -> None:
    async with db.transaction():
        await db.execute(_WITHDRAW, (publisher, now_ms))
        async with db.cursor() as cursor:
            await cursor.executemany(
                _PUBLISH,
                [
                    (publisher, d.definition_id, d.revision, d.document, expires_at_ms)
                    for d in definitions
                ],
            )


async def find(
    db: AsyncConnection[Any], definition_id: str, revision: int, now_ms: int
) -> FoundDefinition | None:
    row = await (await db.execute(_FIND, (definition_id, revision, now_ms))).fetchone()
    return found_of_row(row)
