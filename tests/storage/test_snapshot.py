"""`load_with_messages`: a session and its messages as of one moment, on every backend,
even while another connection commits turns to the same session."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentskit_chat.storage import (
    HistoryChange,
    Store,
    StoredSession,
    open_postgresql_store,
    open_sqlite_store,
)
from tests.postgres import Cluster

from .conftest import drop_schema, fresh_schema, message, run, session

TURNS = 150


def test_it_reads_what_load_and_list_messages_read(store: Store) -> None:
    async def body() -> None:
        assert await store.load_with_messages("s1") is None
        await store.create(session())
        assert await store.load_with_messages("s1") == (session(), ())
        history = HistoryChange(0, (message(1, "first\x00line"), message(2, "ünïcode")))
        assert await store.compare_and_set(session(cursor=1), expected_cursor=0, history=history)
        found = await store.load_with_messages("s1")
        assert found == (await store.load("s1"), tuple(await store.list_messages("s1")))
        assert found is not None
        assert found[1] == (message(1, "first\x00line"), message(2, "ünïcode"))
        assert await store.load_with_messages("s1", tenant="other") is None

    run(body())


def counted(cursor: int) -> StoredSession:
    """A session whose record names how many messages go with it: 2 per cursor."""
    return session(cursor=cursor, record=f"{2 * cursor}".encode())


async def turns(writer: Store) -> None:
    for cursor in range(1, TURNS + 1):
        history = HistoryChange(2 * cursor - 2, (message(2 * cursor - 1), message(2 * cursor)))
        won = await writer.compare_and_set(
            counted(cursor), expected_cursor=cursor - 1, history=history
        )
        assert won


async def reads(reader: Store, done: asyncio.Event | threading.Event) -> int:
    seen = 0
    while not done.is_set():
        found = await reader.load_with_messages("s1")
        assert found is not None
        stored, messages = found
        assert int(stored.record) == len(messages), (stored.cursor, len(messages))
        seen += 1
        await asyncio.sleep(0)
    return seen


@pytest.fixture
def pg_url(postgres: Cluster) -> Iterator[str]:
    name, url = fresh_schema(postgres)
    try:
        yield url
    finally:
        drop_schema(postgres, name)


def test_postgresql_reads_one_snapshot_while_another_connection_commits(
    postgres: Cluster, pg_url: str
) -> None:
    async def body() -> int:
        writer = await open_postgresql_store(pg_url, password=postgres.password, migrate=True)
        reader = await open_postgresql_store(pg_url, password=postgres.password)
        try:
            await writer.create(counted(0))
            done = asyncio.Event()
            readers = [asyncio.create_task(reads(reader, done)) for _ in range(4)]
            try:
                await turns(writer)
            finally:
                done.set()
            return sum(await asyncio.gather(*readers))
        finally:
            await writer.close()
            await reader.close()

    assert run(body()) > 0


def test_sqlite_reads_one_snapshot_while_another_connection_commits(tmp_path: Path) -> None:
    """The writer runs on a thread of its own, as another process's store would."""
    path = tmp_path / "store.db"
    done = threading.Event()
    failure: list[BaseException] = []

    def write() -> None:
        async def body() -> None:
            writer = await open_sqlite_store(path)
            try:
                await turns(writer)
            finally:
                await writer.close()

        try:
            asyncio.run(body())
        except BaseException as exc:
            failure.append(exc)
        finally:
            done.set()

    async def body() -> int:
        reader = await open_sqlite_store(path)
        try:
            await reader.create(counted(0))
            thread = threading.Thread(target=write)
            thread.start()
            try:
                return await reads(reader, done)
            finally:
                thread.join(timeout=60)
        finally:
            await reader.close()

    assert run(body()) > 0
    assert failure == []
