"""Every backend keys sessions by (tenant, session id); SQLite migrates version-1 files."""

from __future__ import annotations

import sqlite3
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from agentskit_chat.storage import (
    SCHEMA_VERSION,
    HistoryChange,
    SessionExistsError,
    Store,
    open_sqlite_store,
)

from .conftest import message, run, session


def test_the_same_id_is_one_session_per_tenant(store: Store) -> None:
    mine = replace(session(record=b"a"), tenant="a")
    theirs = replace(session(record=b"b"), tenant="b")
    run(store.create(mine))
    assert run(store.load("s1", tenant="b")) is None
    assert run(store.load("s1")) is None  # the default tenant is a tenant too
    run(store.create(theirs))
    with pytest.raises(SessionExistsError):
        run(store.create(replace(theirs, record=b"again")))
    assert run(store.load("s1", tenant="a")) == mine
    assert run(store.load("s1", tenant="b")) == theirs


def test_writes_and_deletes_reach_only_their_tenant(store: Store) -> None:
    mine = replace(session(), tenant="a")
    theirs = replace(session(), tenant="b")
    run(store.create(mine))
    run(store.create(theirs))
    change = HistoryChange(0, (message(1), message(2)))
    assert run(store.compare_and_set(replace(mine, cursor=1), expected_cursor=0, history=change))
    assert run(store.list_messages("s1", tenant="b")) == ()
    assert run(store.load("s1", tenant="b")) == theirs
    assert run(store.delete("s1", tenant="b")) is True
    assert run(store.delete("s1", tenant="b")) is False
    assert run(store.load("s1", tenant="a")) == replace(mine, cursor=1)
    assert run(store.list_messages("s1", tenant="a")) == (message(1), message(2))


def test_compare_and_set_never_writes_another_tenants_session(store: Store) -> None:
    run(store.create(replace(session(), tenant="a")))
    stranger = replace(session(cursor=1, record=b"x"), tenant="b")
    assert run(store.compare_and_set(stranger, expected_cursor=0)) is False
    assert run(store.load("s1", tenant="b")) is None
    assert run(store.load("s1", tenant="a")) == replace(session(), tenant="a")


V1_SCHEMA = (
    """CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY NOT NULL, definition_id TEXT NOT NULL,
        revision INTEGER NOT NULL, history_mode TEXT NOT NULL, cursor INTEGER NOT NULL,
        record BLOB NOT NULL, updated_at_ms INTEGER NOT NULL, incarnation TEXT NOT NULL)""",
    """CREATE TABLE messages (
        session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        position INTEGER NOT NULL, message_id TEXT NOT NULL, role TEXT NOT NULL,
        content TEXT NOT NULL, PRIMARY KEY (session_id, position))""",
    "INSERT INTO sessions VALUES ('s1', 'support', 3, 'server', 4, x'0102', 1700, 'inc')",
    "INSERT INTO messages VALUES ('s1', 0, 'm1', 'user', 'hello')",
    "INSERT INTO messages VALUES ('s1', 1, 'm2', 'assistant', 'hi')",
    "PRAGMA user_version = 1",
)


def test_a_version_1_file_moves_to_the_default_tenant(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        for statement in V1_SCHEMA:
            db.execute(statement)
    db.close()

    async def body() -> None:
        store = await open_sqlite_store(path)
        try:
            loaded = await store.load("s1")
            assert loaded is not None
            assert (loaded.tenant, loaded.cursor, loaded.record) == ("", 4, b"\x01\x02")
            assert [m.content for m in await store.list_messages("s1")] == ["hello", "hi"]
            assert [m.tools for m in await store.list_messages("s1")] == ["", ""]
            assert await store.load("s1", tenant="a") is None
            answer = replace(message(3), tools='{"call":"c1"}')
            change = HistoryChange(2, (answer,))
            assert await store.compare_and_set(
                replace(loaded, cursor=5), expected_cursor=4, history=change
            )
            assert (await store.list_messages("s1"))[2] == answer
            assert await store.delete("s1") is True
            assert await store.list_messages("s1") == ()
        finally:
            await store.close()

    run(body())
    with sqlite3.connect(path) as db:
        (version,) = db.execute("PRAGMA user_version").fetchone()
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    db.close()
    assert version == SCHEMA_VERSION == 5
    assert tables == {
        "sessions",
        "messages",
        "turn_events",
        "turn_signals",
        "published_definitions",
    }


def test_the_database_and_its_directory_are_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "state" / "sessions.db"

    async def body() -> None:
        store = await open_sqlite_store(path)
        await store.create(session())
        await store.close()

    run(body())
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    for file in path.parent.iterdir():  # the WAL and shared-memory files too
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file.name
