"""SQLite-only behaviour: files, schema versions, locking, failures and several stores."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import pytest

from agentskit_chat.storage import (
    SCHEMA_VERSION,
    FoundDefinition,
    HistoryChange,
    PublishedDefinition,
    SqliteStore,
    StoreCorruptError,
    StoredMessage,
    StoredSession,
    StoreUnavailableError,
    open_sqlite_store,
)
from agentskit_chat.storage._sqlite_turns import TURN_TABLES
from agentskit_chat.storage.sqlite import CHECKPOINT_EVERY, RESTART_EVERY

from .conftest import message, run, session

ROOT = Path(__file__).resolve().parents[2]
CANARY = "canary-7f3a9c-secret-message-text"


def _raw(path: Path) -> closing[sqlite3.Connection]:
    return closing(sqlite3.connect(path, isolation_level=None))


def _seed(path: Path) -> None:
    async def body() -> None:
        store = await open_sqlite_store(path)
        try:
            await store.create(session())
            history = HistoryChange(keep=0, append=(message(1, CANARY), message(2)))
            await store.compare_and_set(session(cursor=1), expected_cursor=0, history=history)
        finally:
            await store.close()

    run(body())


def _contents(path: Path) -> tuple[StoredSession | None, list[StoredMessage]]:
    async def body() -> tuple[StoredSession | None, list[StoredMessage]]:
        store = await open_sqlite_store(path)
        try:
            return await store.load("s1"), list(await store.list_messages("s1"))
        finally:
            await store.close()

    return run(body())


def test_data_survives_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    _seed(path)
    assert _contents(path) == (session(cursor=1), [message(1, CANARY), message(2)])


def test_parent_directories_are_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "sessions.db"
    _seed(path)
    assert path.is_file()


def test_schema_uses_wal_and_records_its_version(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    _seed(path)
    with _raw(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    assert {"sessions", "messages"} <= tables


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    garbage = b"this is not a database\x00\x01\x02" * 200
    path.write_bytes(garbage)
    with pytest.raises(StoreUnavailableError, match="not a database"):
        run(open_sqlite_store(path))

    async def lazily() -> None:
        store = SqliteStore(path)
        try:
            await store.load("s1")
        finally:
            await store.close()

    with pytest.raises(StoreUnavailableError):
        run(lazily())
    assert path.read_bytes() == garbage


def test_a_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    _seed(path)
    with _raw(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreUnavailableError, match=f"schema version {SCHEMA_VERSION + 1}"):
        run(open_sqlite_store(path))


def test_a_foreign_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with _raw(path) as db:
        db.execute("CREATE TABLE sessions (id INTEGER)")
    with pytest.raises(StoreUnavailableError, match="not a session store"):
        run(open_sqlite_store(path))
    with _raw(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (0,)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailableError):
        run(open_sqlite_store(tmp_path))


def test_a_failing_message_insert_rolls_back_the_whole_change(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    _seed(path)

    async def body() -> None:
        store = await open_sqlite_store(path)
        try:
            with _raw(path) as db:
                db.execute(
                    "CREATE TRIGGER refuse BEFORE INSERT ON messages"
                    " BEGIN SELECT RAISE(ABORT, 'refused'); END"
                )
            change = HistoryChange(keep=1, append=(message(3, CANARY + " new"),))
            with pytest.raises(StoreUnavailableError) as failure:
                await store.compare_and_set(
                    session(cursor=2, record=CANARY.encode()), expected_cursor=1, history=change
                )
            assert CANARY not in str(failure.value)
            assert await store.load("s1") == session(cursor=1)
            assert list(await store.list_messages("s1")) == [message(1, CANARY), message(2)]

            with _raw(path) as db:
                db.execute("DROP TRIGGER refuse")
            assert await store.compare_and_set(session(cursor=2), expected_cursor=1, history=change)
            assert list(await store.list_messages("s1")) == [
                message(1, CANARY),
                message(3, CANARY + " new"),
            ]
        finally:
            await store.close()

    run(body())


def test_a_missing_messages_table_leaves_the_session_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    _seed(path)

    async def body() -> None:
        store = await open_sqlite_store(path)
        try:
            with _raw(path) as db:
                db.execute("DROP TABLE messages")
            change = HistoryChange(keep=0, append=(message(1, CANARY),))
            with pytest.raises(StoreUnavailableError) as failure:
                await store.compare_and_set(session(cursor=2), expected_cursor=1, history=change)
            assert CANARY not in str(failure.value)
            assert await store.load("s1") == session(cursor=1)
        finally:
            await store.close()

    run(body())


def test_a_lock_held_past_the_busy_timeout_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    _seed(path)

    async def body() -> None:
        store = await open_sqlite_store(path, busy_timeout_ms=50)
        try:
            with _raw(path) as db:
                db.execute("BEGIN IMMEDIATE")
                with pytest.raises(StoreUnavailableError, match="locked"):
                    await store.compare_and_set(
                        session(cursor=2),
                        expected_cursor=1,
                        history=HistoryChange(keep=0, append=(message(5, CANARY),)),
                    )
                with pytest.raises(StoreUnavailableError):
                    await store.create(session("s2"))
                assert await store.load("s1") == session(cursor=1)
                db.execute("ROLLBACK")
            assert await store.compare_and_set(session(cursor=2), expected_cursor=1)
            assert await store.load("s2") is None
            assert list(await store.list_messages("s1")) == [message(1, CANARY), message(2)]
        finally:
            await store.close()

    run(body())


def test_two_stores_on_one_file_have_one_winner(tmp_path: Path) -> None:
    path = tmp_path / "store.db"

    async def body() -> list[bool]:
        first = await open_sqlite_store(path)
        second = await open_sqlite_store(path)
        try:
            await first.create(session())
            contenders = [
                (first if n % 2 else second).compare_and_set(
                    session(cursor=1, record=f"task {n}".encode()),
                    expected_cursor=0,
                    history=HistoryChange(keep=0, append=(message(n),)),
                )
                for n in range(16)
            ]
            return await asyncio.gather(*contenders)
        finally:
            await first.close()
            await second.close()

    results = run(body())
    assert results.count(True) == 1
    winner = results.index(True)
    assert _contents(path) == (
        session(cursor=1, record=f"task {winner}".encode()),
        [message(winner)],
    )


_INCREMENTER = textwrap.dedent(
    """
    import asyncio, sys
    from dataclasses import replace
    from pathlib import Path
    from agentskit_chat.storage import HistoryChange, StoredMessage, open_sqlite_store

    async def main(path: str, name: str, rounds: int) -> None:
        store = await open_sqlite_store(path)
        try:
            ready = Path(path).with_name("ready-" + name)
            ready.touch()
            while len(list(ready.parent.glob("ready-*"))) < 2:
                await asyncio.sleep(0.001)
            done = 0
            while done < rounds:
                current = await store.load("s1")
                kept = len(await store.list_messages("s1"))
                change = HistoryChange(
                    keep=kept, append=(StoredMessage(f"{name}{done}", "user", "x"),)
                )
                saved = replace(current, cursor=current.cursor + 1)
                if await store.compare_and_set(
                    saved, expected_cursor=current.cursor, history=change
                ):
                    done += 1
        finally:
            await store.close()

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)


def test_two_processes_incrementing_never_lose_an_update(tmp_path: Path) -> None:
    path = tmp_path / "store.db"

    async def seed() -> None:
        store = await open_sqlite_store(path)
        try:
            await store.create(session())
        finally:
            await store.close()

    run(seed())
    rounds = 200
    env = {**os.environ, "PYTHONPATH": str(ROOT / "server")}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _INCREMENTER, str(path), name, str(rounds)],
            env=env,
            stderr=subprocess.PIPE,
        )
        for name in ("a", "b")
    ]
    for worker in workers:
        _, errors = worker.communicate(timeout=120)
        assert worker.returncode == 0, errors.decode()
    loaded, messages = _contents(path)
    assert loaded is not None
    assert loaded.cursor == 2 * rounds
    ids = [m.message_id for m in messages]
    assert sorted(ids) == sorted(
        [f"a{n}" for n in range(rounds)] + [f"b{n}" for n in range(rounds)]
    )
    assert [i for i in ids if i.startswith("a")] == [f"a{n}" for n in range(rounds)]


def test_a_write_waits_for_another_writer_on_the_worker_thread(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    _seed(path)

    async def body() -> None:
        store = await open_sqlite_store(path, busy_timeout_ms=10_000)
        blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            loop = asyncio.get_running_loop()
            loop.call_later(0.2, blocker.execute, "ROLLBACK")
            won = await store.compare_and_set(session(cursor=2), expected_cursor=1)
            assert won
            loaded = await store.load("s1")
            assert loaded is not None
            assert loaded.cursor == 2
        finally:
            blocker.close()
            await store.close()

    run(body())


def _log_frames(path: Path) -> int:
    """Frames in the write-ahead log since it last started over."""
    with _raw(path) as db:
        db.execute("PRAGMA wal_autocheckpoint = 0")
        _, frames, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone() or (0, 0, 0)
    return int(frames)


def test_checkpoints_start_the_write_ahead_log_over(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    record = b"x" * 8192
    writes = 4 * CHECKPOINT_EVERY * RESTART_EVERY

    async def body() -> tuple[int, int]:
        store = await open_sqlite_store(path)
        try:
            await store.create(session(record=record))
            per_write = 0
            for cursor in range(1, writes + 1):
                await store.compare_and_set(
                    session(cursor=cursor, record=record), expected_cursor=cursor - 1
                )
                if cursor == 8:
                    per_write = _log_frames(path) // 8
                checkpoint = store._connections._checkpoint
                if checkpoint is not None:  # let the worker thread's checkpoint finish
                    await asyncio.wait({checkpoint})
            return per_write, _log_frames(path)
        finally:
            await store.close()

    per_write, frames = run(body())
    assert per_write >= 1
    # Without restarts the log would hold every write's frames.
    assert frames < writes * per_write / 2


@pytest.mark.parametrize("column", ["content", "tools"])
def test_stored_text_that_is_not_utf8_is_corrupt_and_not_quoted(
    tmp_path: Path, column: str
) -> None:
    path = tmp_path / "sessions.db"
    _seed(path)
    with _raw(path) as db:
        db.execute(
            f"UPDATE messages SET {column} = CAST(? AS TEXT) WHERE position = 0",
            (CANARY.encode() + b"\xff\xfe",),
        )

    async def body() -> None:
        store = await open_sqlite_store(path)
        try:
            with pytest.raises(StoreCorruptError) as caught:
                await store.list_messages("s1")
            assert CANARY not in str(caught.value)
            loaded = await store.load("s1")
            assert loaded is not None
        finally:
            await store.close()

    run(body())


def test_an_unknown_history_mode_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    _seed(path)
    with _raw(path) as db:
        db.execute("UPDATE sessions SET history_mode = 'sideways'")

    async def body() -> None:
        store = await open_sqlite_store(path)
        try:
            with pytest.raises(StoreCorruptError):
                await store.load("s1")
        finally:
            await store.close()

    run(body())


_ONE_WRITE = textwrap.dedent(
    """
    import asyncio, sys
    from dataclasses import replace
    from agentskit_chat.storage import HistoryChange, StoredMessage, open_sqlite_store

    async def main(path: str, name: str) -> None:
        store = await open_sqlite_store(path)
        try:
            current = await store.load("s1")
            kept = len(await store.list_messages("s1"))
            change = HistoryChange(keep=kept, append=(StoredMessage(name, "user", "x"),))
            saved = replace(current, cursor=current.cursor + 1)
            if not await store.compare_and_set(
                saved, expected_cursor=current.cursor, history=change
            ):
                sys.exit("lost the compare-and-set")
        finally:
            await store.close()

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def test_other_processes_closing_leave_an_open_store_consistent(tmp_path: Path) -> None:
    # A store that has opened both its connections keeps the file locked against another
    # process's last close, which would otherwise checkpoint and delete the write-ahead log
    # from under it: later processes would then write to a new log the store never sees.
    path = tmp_path / "sessions.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "server")}

    def write_in_another_process(name: str) -> None:
        done = subprocess.run(
            [sys.executable, "-c", _ONE_WRITE, str(path), name],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()

    async def body() -> None:
        store = await open_sqlite_store(path, busy_timeout_ms=10_000)
        blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            await store.create(session())
            # Held write lock: the store's write waits on its worker thread's connection.
            blocker.execute("BEGIN IMMEDIATE")
            asyncio.get_running_loop().call_later(0.1, blocker.execute, "ROLLBACK")
            change = HistoryChange(keep=0, append=(message(1),))
            assert await store.compare_and_set(session(cursor=1), expected_cursor=0, history=change)
            blocker.close()
            for name in ("p1", "p2"):
                await asyncio.to_thread(write_in_another_process, name)
                loaded = await store.load("s1")
                assert loaded is not None
                ids = [m.message_id for m in await store.list_messages("s1")]
                change = HistoryChange(keep=len(ids), append=(message(loaded.cursor + 10),))
                assert await store.compare_and_set(
                    session(cursor=loaded.cursor + 1), expected_cursor=loaded.cursor, history=change
                )
        finally:
            blocker.close()
            await store.close()

    run(body())
    loaded, messages = _contents(path)
    assert [m.message_id for m in messages] == ["m1", "p1", "m12", "p2", "m14"]
    assert loaded is not None
    assert loaded.cursor == 5


V3_SCHEMA = (
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
    *TURN_TABLES,
    "INSERT INTO sessions VALUES ('a', 's1', 'support', 3, 'server', 4, x'0102', 1700, 'inc')",
    "INSERT INTO messages VALUES ('a', 's1', 0, 'm1', 'user', 'hello')",
    "INSERT INTO messages VALUES ('a', 's1', 1, 'm2', 'assistant', 'hi')",
    "PRAGMA user_version = 3",
)


def test_a_version_3_file_keeps_its_messages_and_then_stores_tools(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with _raw(path) as db:
        for statement in V3_SCHEMA:
            db.execute(statement)
    calls = '{"calls":[["c1","lookup","{\\"order\\":\\"A-1\\"}"]]}'
    answer = '{"call":"c1"}'

    async def body() -> None:
        store = await open_sqlite_store(path)
        try:
            found = await store.load_with_messages("s1", tenant="a")
            assert found is not None
            loaded, messages = found
            assert (loaded.cursor, loaded.record, loaded.incarnation) == (4, b"\x01\x02", "inc")
            assert messages == (
                StoredMessage("m1", "user", "hello"),
                StoredMessage("m2", "assistant", "hi"),
            )
            assert [m.tools for m in messages] == ["", ""]
            change = HistoryChange(1, (StoredMessage("m3", "assistant", "", calls),))
            saved = replace(loaded, cursor=5)
            assert await store.compare_and_set(saved, expected_cursor=4, history=change)
            change = HistoryChange(2, (StoredMessage("m4", "tool", "42", answer),))
            saved = replace(loaded, cursor=6)
            assert await store.compare_and_set(saved, expected_cursor=5, history=change)
        finally:
            await store.close()

    run(body())

    async def reopened() -> list[StoredMessage]:
        store = await open_sqlite_store(path)
        try:
            return list(await store.list_messages("s1", tenant="a"))
        finally:
            await store.close()

    assert run(reopened()) == [
        StoredMessage("m1", "user", "hello"),
        StoredMessage("m3", "assistant", "", calls),
        StoredMessage("m4", "tool", "42", answer),
    ]
    with _raw(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        columns = [row[1] for row in db.execute("PRAGMA table_info(messages)")]
    assert SCHEMA_VERSION == 5
    assert columns == ["tenant", "session_id", "position", "message_id", "role", "content", "tools"]


def test_fresh_and_migrated_files_have_the_same_messages_table(tmp_path: Path) -> None:
    fresh, old = tmp_path / "fresh.db", tmp_path / "old.db"
    _seed(fresh)
    with _raw(old) as db:
        for statement in V3_SCHEMA:
            db.execute(statement)

    async def migrate() -> None:
        await (await open_sqlite_store(old)).close()

    run(migrate())
    layouts = []
    for path in (fresh, old):
        with _raw(path) as db:
            layouts.append(db.execute("PRAGMA table_info(messages)").fetchall())
    assert layouts[0] == layouts[1]
    assert layouts[0][-1][1:] == ("tools", "TEXT", 1, "''", 0)


def test_a_version_4_file_gains_the_published_definitions(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    run(_create_session_and_close(path))
    with _raw(path) as db:
        db.execute("DROP TABLE published_definitions")
        db.execute("PRAGMA user_version = 4")
    document = PublishedDefinition("support", 2, '{"id": "support"}')

    async def body() -> FoundDefinition | None:
        store = await open_sqlite_store(path)
        try:
            assert await store.load("s1") is not None
            await store.publish_definitions("a", [document], expires_at_ms=20, now_ms=10)
            return await store.published_definition("support", 2, now_ms=10)
        finally:
            await store.close()

    assert run(body()) == FoundDefinition(document.document, 20)
    with _raw(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


async def _create_session_and_close(path: Path) -> None:
    store = await open_sqlite_store(path)
    try:
        await store.create(session())
    finally:
        await store.close()


@pytest.mark.parametrize("behind", ["x'00'", "x''", "'r0'"])
def test_a_record_changed_behind_the_cursor_fails_a_write_expecting_the_old_one(
    tmp_path: Path, behind: str
) -> None:
    """Other bytes, none, or the same characters stored as text: none is the held blob."""
    path = tmp_path / "store.db"
    _seed(path)  # record b"r0" at cursor 1
    with _raw(path) as db:
        db.execute(f"UPDATE sessions SET record = {behind}")  # the cursor stays 1
        (row,) = db.execute("SELECT * FROM sessions").fetchall()

    async def write() -> list[bool]:
        store = await open_sqlite_store(path)
        try:
            change = HistoryChange(2, (message(3),))
            return [
                await store.compare_and_set(
                    session(cursor=2), expected_cursor=1, history=change, expected_record=b"r0"
                ),
                await store.compare_and_set(
                    session(cursor=2), expected_cursor=1, expected_record=b"r0"
                ),
            ]
        finally:
            await store.close()

    assert run(write()) == [False, False]
    with _raw(path) as db:
        assert db.execute("SELECT * FROM sessions").fetchall() == [row]
        assert db.execute("SELECT count(*) FROM messages").fetchone() == (2,)
