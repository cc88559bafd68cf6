"""Shared fixtures: one contract suite, run against every backend."""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
import threading
from collections.abc import Callable, Collection, Coroutine, Iterator, Sequence
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest

from agentskit_chat.storage import (
    DEFAULT_TENANT,
    EventBatch,
    FoundDefinition,
    HistoryChange,
    HistoryMode,
    MemoryStore,
    PostgresqlStore,
    PublishedDefinition,
    SqliteStore,
    Store,
    StoredMessage,
    StoredSession,
    TurnKey,
    TurnSignal,
    open_postgresql_store,
    open_sqlite_store,
)
from tests.postgres import Cluster
from tests.waiting import until

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine on a fresh event loop."""
    return asyncio.run(coroutine)


def session(session_id: str = "s1", *, cursor: int = 0, record: bytes = b"r0") -> StoredSession:
    return StoredSession(
        session_id=session_id,
        definition_id="support",
        revision=3,
        history_mode=HistoryMode.SERVER,
        cursor=cursor,
        record=record,
        updated_at_ms=1_700_000_000_000 + cursor,
    )


def message(n: int, content: str | None = None) -> StoredMessage:
    return StoredMessage(f"m{n}", "user" if n % 2 else "assistant", content or f"text {n}")


def fresh_schema(postgres: Cluster) -> tuple[str, str]:
    """(schema name, store URL whose connections use it): an empty namespace per test."""
    name = f"t_{secrets.token_hex(6)}"
    with postgres.connect() as connection:
        connection.execute(f"CREATE SCHEMA {name}")
    return name, f"{postgres.url()}?options=-csearch_path%3D{name}"


def drop_schema(postgres: Cluster, name: str) -> None:
    with postgres.connect() as connection:
        connection.execute(f"DROP SCHEMA {name} CASCADE")


async def open_backend(kind: str, directory: Path) -> Store:
    if kind == "memory":
        return MemoryStore()
    return await open_sqlite_store(directory / "store.db")


class OnOwnLoop:
    """A store that lives on an event loop of its own, in a thread.

    The contract tests run every call on a fresh event loop (`run`); a connection pool
    belongs to the loop that opened it, as in a server. This forwards each call to the
    store's own loop and back, unchanged.
    """

    def __init__(self, url: str, password: str) -> None:
        self.url = url
        self.password = password
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._store = self._call_sync(open_postgresql_store(url, password=password, migrate=True))

    def _call_sync(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    async def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self._loop))

    async def create(self, session: StoredSession) -> None:
        await self._call(self._store.create(session))

    async def load(self, session_id: str, *, tenant: str = DEFAULT_TENANT) -> StoredSession | None:
        return await self._call(self._store.load(session_id, tenant=tenant))

    async def compare_and_set(
        self,
        session: StoredSession,
        *,
        expected_cursor: int,
        history: HistoryChange | None = None,
        expected_record: bytes | None = None,
    ) -> bool:
        change = self._store.compare_and_set(
            session,
            expected_cursor=expected_cursor,
            history=history,
            expected_record=expected_record,
        )
        return await self._call(change)

    async def delete(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT, expected_cursor: int | None = None
    ) -> bool:
        removal = self._store.delete(session_id, tenant=tenant, expected_cursor=expected_cursor)
        return await self._call(removal)

    async def load_with_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> tuple[StoredSession, tuple[StoredMessage, ...]] | None:
        return await self._call(self._store.load_with_messages(session_id, tenant=tenant))

    async def list_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> Sequence[StoredMessage]:
        return await self._call(self._store.list_messages(session_id, tenant=tenant))

    async def append_events(self, key: TurnKey, batch: EventBatch, *, expires_at_ms: int) -> bool:
        return await self._call(self._store.append_events(key, batch, expires_at_ms=expires_at_ms))

    async def read_events(
        self, key: TurnKey, after: int = 0, *, now_ms: int = 0
    ) -> tuple[EventBatch, ...]:
        return await self._call(self._store.read_events(key, after, now_ms=now_ms))

    async def send_signal(self, signal: TurnSignal, *, expires_at_ms: int) -> None:
        await self._call(self._store.send_signal(signal, expires_at_ms=expires_at_ms))

    async def take_signals(self, holder: str) -> tuple[TurnSignal, ...]:
        return await self._call(self._store.take_signals(holder))

    async def newest_run(self, tenant: str, session_id: str, turn_id: str) -> str | None:
        return await self._call(self._store.newest_run(tenant, session_id, turn_id))

    async def expire(self, now_ms: int) -> int:
        return await self._call(self._store.expire(now_ms))

    async def wait(self, topics: Collection[str], timeout: float) -> None:
        await self._call(self._store.wait(topics, timeout))

    async def publish_definitions(
        self,
        publisher: str,
        definitions: Sequence[PublishedDefinition],
        *,
        expires_at_ms: int,
        now_ms: int,
    ) -> None:
        publish = self._store.publish_definitions(
            publisher, definitions, expires_at_ms=expires_at_ms, now_ms=now_ms
        )
        await self._call(publish)

    async def published_definition(
        self, definition_id: str, revision: int, *, now_ms: int
    ) -> FoundDefinition | None:
        return await self._call(
            self._store.published_definition(definition_id, revision, now_ms=now_ms)
        )

    async def close(self) -> None:
        await self._call(self._store.close())

    def shutdown(self) -> None:
        """Close the store and stop its loop."""
        self._call_sync(self._store.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param != "postgresql":
        opened = run(open_backend(request.param, tmp_path))
        yield opened
        run(opened.close())
        return
    postgres: Cluster = request.getfixturevalue("postgres")
    schema, url = fresh_schema(postgres)
    try:
        opened = OnOwnLoop(url, postgres.password)
        try:
            yield opened
        finally:
            opened.shutdown()
    finally:
        drop_schema(postgres, schema)


@pytest.fixture
def reopen(store: Store) -> Iterator[Callable[[], Store]]:
    """Close `store` and open another on its database, as a restarted server does.

    The memory store, whose data lives only as long as it does, is returned as it is.
    """
    opened: list[Store] = []

    def again() -> Store:
        if isinstance(store, MemoryStore):
            return store
        run(store.close())
        if isinstance(store, SqliteStore):
            other: Store = run(open_sqlite_store(store.path))
        else:
            assert isinstance(store, OnOwnLoop)
            other = OnOwnLoop(store.url, store.password)
        opened.append(other)
        return other

    yield again
    for other in opened:
        if isinstance(other, OnOwnLoop):
            other.shutdown()
        else:
            run(other.close())


def waits(store: Store) -> int:
    """How many `wait` calls of the store are in progress (registered with its waiters)."""
    if isinstance(store, OnOwnLoop):
        return waits(store._store)  # an int, read from this thread
    assert isinstance(store, MemoryStore | SqliteStore | PostgresqlStore), store
    return store._wakeups.pending


async def until_waiting(store: Store, count: int = 1) -> None:
    """Once `count` waits of the store are in progress: a write from now on wakes them."""
    await until(lambda: waits(store) >= count, f"{count} waits of the store")


def behind(store: Store, session_id: str, *, record: bytes | None = None, drop: int = 0) -> None:
    """Change the session's stored row as no store call can, its cursor unchanged: set its
    record bytes to `record` (when given) and delete its last `drop` messages, directly in
    the database (the memory store's own tables)."""
    if isinstance(store, MemoryStore):
        key = (DEFAULT_TENANT, session_id)
        if record is not None:
            store._sessions[key] = replace(store._sessions[key], record=record)
        if drop:
            store._messages[key] = store._messages[key][:-drop]
        return
    statements: list[tuple[str, tuple[object, ...]]] = []
    if record is not None:
        statements.append(
            ("UPDATE sessions SET record = {p} WHERE session_id = {p}", (record, session_id))
        )
    if drop:
        last = "(SELECT count(*) FROM messages WHERE session_id = {p})"
        statements.append(
            (
                f"DELETE FROM messages WHERE session_id = {{p}} AND position >= {last} - {drop}",
                (session_id, session_id),
            )
        )
    if isinstance(store, SqliteStore):
        with closing(sqlite3.connect(store.path, isolation_level=None)) as db:
            for statement, params in statements:
                db.execute(statement.format(p="?"), params)
        return
    assert isinstance(store, OnOwnLoop), store
    with psycopg.connect(store.url, password=store.password, autocommit=True) as connection:
        for statement, params in statements:
            connection.execute(statement.format(p="%s"), params)
