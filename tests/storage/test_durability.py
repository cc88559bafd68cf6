"""SQLite's durability choice: `full` syncs each commit off the event loop, `normal` commits
on it without a sync; both keep what they acknowledged when the process is killed."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentskit_chat.storage import (
    SYNCHRONOUS_MODES,
    HistoryChange,
    SqliteStore,
    open_sqlite_store,
    open_store,
)

from .conftest import message, run, session

ROOT = Path(__file__).resolve().parents[2]


def test_an_unknown_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="synchronous must be one of normal, full"):
        SqliteStore("unused.db", synchronous="off")


def _synchronous_level(db: sqlite3.Connection) -> int:
    (level,) = db.execute("PRAGMA synchronous").fetchone()
    return int(level)


@pytest.mark.parametrize(("synchronous", "level"), [("normal", 1), ("full", 2)])
def test_each_connection_commits_at_the_chosen_level(
    tmp_path: Path, synchronous: str, level: int
) -> None:
    """`PRAGMA synchronous` belongs to a connection: it is read on the event loop's
    connection and on the worker thread's one (NORMAL is 1, FULL 2). The store offers no
    way to ask, so this reaches for the connections the store itself runs statements on."""

    async def body() -> tuple[int, int]:
        store = await open_sqlite_store(tmp_path / "store.db", synchronous=synchronous)
        try:
            await store.create(session())  # a write: on the worker thread with `full`
            connections = store._connections
            on_loop = connections.attempt("probe", _synchronous_level)
            worker = asyncio.get_running_loop().run_in_executor(
                connections.executor, connections.on_worker, "probe", _synchronous_level
            )
            return on_loop, await worker
        finally:
            await store.close()

    assert run(body()) == (level, level)


@pytest.mark.parametrize("synchronous", SYNCHRONOUS_MODES)
def test_a_write_leaves_the_event_loop_free_only_when_it_syncs(
    tmp_path: Path, synchronous: str
) -> None:
    """With `full` a commit waits for the disk on the worker thread, and other tasks run
    meanwhile; with `normal` it takes microseconds on the loop and never yields it."""

    async def body() -> tuple[int, int]:
        store = await open_sqlite_store(tmp_path / "store.db", synchronous=synchronous)
        assert store.synchronous == synchronous
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        try:
            before = ticks
            await store.create(session())
            history = HistoryChange(0, (message(1), message(2)))
            assert await store.compare_and_set(
                session(cursor=1), expected_cursor=0, history=history
            )
            during_writes = ticks - before
            before = ticks
            assert await store.load_with_messages("s1") is not None
            during_read = ticks - before
        finally:
            task.cancel()
            await store.close()
        return during_writes, during_read

    during_writes, during_read = run(body())
    assert during_read == 0  # reads stay on the event loop's connection
    if synchronous == "full":
        assert during_writes > 0
    else:
        assert during_writes == 0


@pytest.mark.parametrize("synchronous", SYNCHRONOUS_MODES)
def test_acknowledged_writes_survive_a_killed_process(tmp_path: Path, synchronous: str) -> None:
    path = tmp_path / "store.db"
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal, sys
        from agentskit_chat.storage import HistoryChange, open_store
        from tests.storage.conftest import message, session

        async def main():
            store = await open_store({str(path)!r}, sqlite_synchronous={synchronous!r})
            await store.create(session())
            for cursor in range(1, 21):
                change = HistoryChange(cursor - 1, (message(cursor),))
                await store.compare_and_set(
                    session(cursor=cursor), expected_cursor=cursor - 1, history=change
                )
            print("acknowledged", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == -9, done.stderr
    assert done.stdout.strip() == "acknowledged"

    async def body() -> None:
        store = await open_store(str(path), sqlite_synchronous=synchronous)
        try:
            found = await store.load_with_messages("s1")
            assert found is not None
            assert found[0].cursor == 20
            assert found[1] == tuple(message(n) for n in range(1, 21))
        finally:
            await store.close()

    run(body())
