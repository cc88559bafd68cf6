"""SQLite specifics of live turns: wake-ups across stores and processes sharing one file,
the migration from schema version 2, and rows that cannot be read back."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentskit_chat.storage import (
    SCHEMA_VERSION,
    EventBatch,
    SignalKind,
    SqliteStore,
    StoreCorruptError,
    TurnKey,
    TurnSignal,
    holder_topic,
    open_sqlite_store,
    session_topic,
    turn_topic,
)
from tests.waiting import until

from .conftest import run, session, until_waiting

ROOT = Path(__file__).resolve().parents[2]
KEY = TurnKey("", "s1", "t1")
LATER = 2_000_000_000_000
WAIT = 10.0
"""A bound for wake-ups that must come: far above any real delay, never reached."""


async def woken(store: SqliteStore, topic: str) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    await store.wait([topic], WAIT)
    assert loop.time() - started < WAIT, "the wait ran to its timeout: never woken"


async def two_stores(path: Path) -> tuple[SqliteStore, SqliteStore]:
    return await open_sqlite_store(path), await open_sqlite_store(path)


def test_a_write_through_another_store_wakes_the_waiter(tmp_path: Path) -> None:
    async def body() -> None:
        waiting, writing = await two_stores(tmp_path / "store.db")
        try:
            for topic, write in (
                (session_topic("", "s1"), writing.create(session())),
                (
                    session_topic("", "s1"),
                    writing.compare_and_set(session(cursor=1), expected_cursor=0),
                ),
                (
                    turn_topic(KEY),
                    writing.append_events(KEY, EventBatch(1, 1, b"e"), expires_at_ms=LATER),
                ),
                (
                    holder_topic("h"),
                    writing.send_signal(
                        TurnSignal("h", SignalKind.CANCEL, KEY), expires_at_ms=LATER
                    ),
                ),
            ):
                waiter = asyncio.ensure_future(woken(waiting, topic))
                await until_waiting(waiting)
                assert not waiter.done()
                await write
                await asyncio.wait_for(waiter, WAIT)
        finally:
            await waiting.close()
            await writing.close()

    run(body())


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from agentskit_chat.storage import EventBatch, TurnKey, open_sqlite_store

    async def main(path: str) -> None:
        store = await open_sqlite_store(path)
        try:
            sys.stdin.readline()  # the waiter waits
            batch = EventBatch(1, 1, b"event", final=True)
            await store.append_events(TurnKey("", "s1", "t1"), batch, expires_at_ms=2**40)
        finally:
            await store.close()

    asyncio.run(main(sys.argv[1]))
    """
)


def test_a_write_by_another_process_wakes_the_waiter(tmp_path: Path) -> None:
    path = tmp_path / "store.db"

    async def body() -> int | None:
        store = await open_sqlite_store(path)
        env = {**os.environ, "PYTHONPATH": str(ROOT / "server")}
        writer = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path)], env=env, stdin=subprocess.PIPE
        )
        try:
            assert await store.read_events(KEY) == ()
            waiter = asyncio.ensure_future(woken(store, turn_topic(KEY)))
            await until_waiting(store)
            assert not waiter.done()
            assert writer.stdin is not None
            writer.stdin.write(b"go\n")
            writer.stdin.flush()
            await asyncio.wait_for(waiter, WAIT)
            assert await store.read_events(KEY) == (EventBatch(1, 1, b"event", final=True),)
        finally:
            if writer.stdin is not None:
                writer.stdin.close()
            await asyncio.to_thread(writer.wait, 60)
            await store.close()
        return writer.returncode

    assert run(body()) == 0


def test_polling_runs_only_while_someone_waits(tmp_path: Path) -> None:
    async def body() -> None:
        store = await open_sqlite_store(tmp_path / "store.db")
        try:
            assert not polling(store)
            waiter = asyncio.ensure_future(store.wait([turn_topic(KEY)], 0.12))
            await until_waiting(store)
            assert polling(store)
            await waiter
            await until(lambda: not polling(store), "the end of polling")
        finally:
            await store.close()

    run(body())


def polling(store: SqliteStore) -> bool:
    """Whether a task of the store looks for other processes' writes."""
    return any(
        getattr(task.get_coro(), "__qualname__", "") == "SqliteStore._poll"
        for task in asyncio.all_tasks()
    )


def test_close_wakes_a_waiter(tmp_path: Path) -> None:
    async def body() -> None:
        store = await open_sqlite_store(tmp_path / "store.db")
        waiter = asyncio.ensure_future(store.wait([turn_topic(KEY)], WAIT))
        await until_waiting(store)
        await store.close()
        await asyncio.wait_for(waiter, WAIT)

    run(body())


V2_SCHEMA = (
    """CREATE TABLE sessions (
        tenant TEXT NOT NULL, session_id TEXT NOT NULL, definition_id TEXT NOT NULL,
        revision INTEGER NOT NULL, history_mode TEXT NOT NULL, cursor INTEGER NOT NULL,
        record BLOB NOT NULL, updated_at_ms INTEGER NOT NULL, incarnation TEXT NOT NULL,
        PRIMARY KEY (tenant, session_id))""",
    """CREATE TABLE messages (
        tenant TEXT NOT NULL, session_id TEXT NOT NULL, position INTEGER NOT NULL,
        message_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL,
        PRIMARY KEY (tenant, session_id, position),
        FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, session_id)
            ON DELETE CASCADE)""",
    "INSERT INTO sessions VALUES ('a', 's1', 'support', 3, 'server', 4, x'0102', 1700, 'inc')",
    "INSERT INTO messages VALUES ('a', 's1', 0, 'm1', 'user', 'hello')",
    "PRAGMA user_version = 2",
)


def test_a_version_2_file_keeps_its_sessions_and_gains_live_turns(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        for statement in V2_SCHEMA:
            db.execute(statement)
    db.close()

    async def body() -> None:
        store = await open_sqlite_store(path)
        try:
            loaded = await store.load("s1", tenant="a")
            assert loaded is not None
            assert (loaded.cursor, loaded.record, loaded.incarnation) == (4, b"\x01\x02", "inc")
            assert [m.content for m in await store.list_messages("s1", tenant="a")] == ["hello"]
            assert [m.tools for m in await store.list_messages("s1", tenant="a")] == [""]
            key = TurnKey("a", "s1", "t1")
            assert await store.append_events(key, EventBatch(1, 2, b"e"), expires_at_ms=LATER)
            assert await store.read_events(key) == (EventBatch(1, 2, b"e"),)
            signal = TurnSignal("h", SignalKind.PUBLISH, key)
            await store.send_signal(signal, expires_at_ms=LATER)
            assert await store.take_signals("h") == (signal,)
        finally:
            await store.close()

    run(body())
    with sqlite3.connect(path) as db:
        (version,) = db.execute("PRAGMA user_version").fetchone()
    db.close()
    assert version == SCHEMA_VERSION == 5


@pytest.mark.parametrize(
    "assignment",
    [
        "body = 'text, not bytes'",
        "first_sequence = 5",
        "first_sequence = 'one'",
        "final = 2",
        "last_sequence = 'x'",
        "final = NULL",
    ],
)
def test_a_malformed_batch_is_corrupt_and_not_quoted(tmp_path: Path, assignment: str) -> None:
    path = tmp_path / "store.db"

    async def seed() -> None:
        store = await open_sqlite_store(path)
        await store.append_events(KEY, EventBatch(1, 2, b"secret words"), expires_at_ms=LATER)
        await store.close()

    run(seed())
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA ignore_check_constraints = ON")
        db.execute("CREATE TABLE copy AS SELECT * FROM turn_events")
        db.execute("DROP TABLE turn_events")
        db.execute("ALTER TABLE copy RENAME TO turn_events")  # without NOT NULL
        db.execute(f"UPDATE turn_events SET {assignment}")
    db.close()

    async def read() -> None:
        store = await open_sqlite_store(path)
        try:
            with pytest.raises(StoreCorruptError) as raised:
                await store.read_events(KEY)
            assert "secret" not in str(raised.value)
            assert "text" not in str(raised.value)
        finally:
            await store.close()

    run(read())


def test_a_signal_of_unknown_kind_is_corrupt_and_stays(tmp_path: Path) -> None:
    path = tmp_path / "store.db"

    async def seed() -> None:
        store = await open_sqlite_store(path)
        await store.send_signal(TurnSignal("h", SignalKind.CANCEL, KEY), expires_at_ms=LATER)
        await store.close()

    run(seed())
    with sqlite3.connect(path) as db:
        db.execute("UPDATE turn_signals SET kind = 'explode'")
    db.close()

    async def take() -> None:
        store = await open_sqlite_store(path)
        try:
            with pytest.raises(StoreCorruptError) as raised:
                await store.take_signals("h")
            assert "explode" not in str(raised.value)
        finally:
            await store.close()

    run(take())
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM turn_signals").fetchone() == (1,)
    db.close()
