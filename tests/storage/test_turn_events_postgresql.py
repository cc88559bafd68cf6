"""PostgreSQL specifics of live turns: wake-ups by LISTEN/NOTIFY across stores (replicas),
a listening connection that breaks, the migration from schema version 1, concurrent
appends, and rows that cannot be read back."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from agentskit_chat.storage import (
    EventBatch,
    HistoryChange,
    PostgresqlStore,
    SignalKind,
    StoreCorruptError,
    StoreUnavailableError,
    TurnKey,
    TurnSignal,
    holder_topic,
    open_postgresql_store,
    session_topic,
    turn_topic,
)
from agentskit_chat.storage._postgresql_turns import INTEREST_GRACE
from agentskit_chat.storage.postgresql import MIGRATIONS, NOTIFY_CHANNEL, SCHEMA_VERSION
from tests.postgres import Cluster

from .conftest import drop_schema, fresh_schema, message, run, session, until_waiting

KEY = TurnKey("", "s1", "t1")
LATER = 2_000_000_000_000
WAIT = 10.0
"""A bound for wake-ups that must come: far above any real delay, never reached."""
CANARY = "canary-77c1-secret-event-text"


@pytest.fixture
def schema(postgres: Cluster) -> Iterator[str]:
    """The store URL of an empty schema of its own."""
    name, url = fresh_schema(postgres)
    try:
        yield url
    finally:
        drop_schema(postgres, name)


def _sql(postgres: Cluster, url: str, statement: str) -> list[tuple[object, ...]]:
    schema = url.rsplit("%3D", 1)[1]
    with postgres.connect() as connection:
        connection.execute(f"SET search_path = {schema}")
        cursor = connection.execute(statement)
        return cursor.fetchall() if cursor.description else []


async def settled(store: PostgresqlStore, *topics: str) -> None:
    """Wait until the store listens and has registered `topics` past their grace: its
    first waits on them return early."""
    loop = asyncio.get_running_loop()
    for _ in range(20):
        started = loop.time()
        await store.wait(topics, INTEREST_GRACE + 0.1)
        if loop.time() - started >= INTEREST_GRACE + 0.1:
            return
    raise AssertionError("every wait was woken early")


async def wakes(waiting: PostgresqlStore, topic: str, write: Awaitable[object]) -> None:
    """`write` (through another store) wakes a waiter of `topic` on `waiting`."""
    loop = asyncio.get_running_loop()

    async def woken() -> None:
        started = loop.time()
        await waiting.wait([topic], WAIT)
        assert loop.time() - started < WAIT, "the wait ran to its timeout: never woken"

    waiter = asyncio.ensure_future(woken())
    await until_waiting(waiting)
    assert not waiter.done()
    await write
    await asyncio.wait_for(waiter, WAIT)


def test_writes_through_another_store_wake_the_waiter(postgres: Cluster, schema: str) -> None:
    async def body() -> None:
        waiting = await open_postgresql_store(schema, password=postgres.password, migrate=True)
        writing = await open_postgresql_store(schema, password=postgres.password)
        try:
            topic = session_topic("", "s1")
            await settled(waiting, topic, turn_topic(KEY), holder_topic("h"))
            await wakes(waiting, topic, writing.create(session()))
            await wakes(
                waiting, topic, writing.compare_and_set(session(cursor=1), expected_cursor=0)
            )
            saved = writing.compare_and_set(
                session(cursor=2), expected_cursor=1, history=HistoryChange(0, (message(1),))
            )
            await wakes(waiting, topic, saved)
            await wakes(waiting, topic, writing.delete("s1"))
            appended = writing.append_events(KEY, EventBatch(1, 1, b"e"), expires_at_ms=LATER)
            await wakes(waiting, turn_topic(KEY), appended)
            signal = TurnSignal("h", SignalKind.CANCEL, KEY)
            sent = writing.send_signal(signal, expires_at_ms=LATER)
            await wakes(waiting, holder_topic("h"), sent)
            assert await waiting.read_events(KEY) == (EventBatch(1, 1, b"e"),)
            assert await waiting.take_signals("h") == (signal,)
        finally:
            await waiting.close()
            await writing.close()

    run(body())


def test_writes_that_change_nothing_notify_nothing(postgres: Cluster, schema: str) -> None:
    async def body() -> list[str]:
        store = await open_postgresql_store(schema, password=postgres.password, migrate=True)
        try:
            await store.create(session())
            await store.append_events(KEY, EventBatch(1, 1, b"e"), expires_at_ms=LATER)
            await settled(store, session_topic("", "s1"), turn_topic(KEY))
            async with await _listener(postgres, schema) as listener:
                assert not await store.compare_and_set(session(cursor=5), expected_cursor=4)
                assert not await store.compare_and_set(
                    session(cursor=5), expected_cursor=4, history=HistoryChange(0, ())
                )
                assert not await store.delete("s1", expected_cursor=7)
                assert not await store.delete("unknown")
                refused = EventBatch(1, 2, b"e")
                assert not await store.append_events(KEY, refused, expires_at_ms=LATER)
                assert await store.compare_and_set(session(cursor=1), expected_cursor=0)
                return [note.payload async for note in listener.notifies(timeout=1.0, stop_after=1)]
        finally:
            await store.close()

    assert run(body()) == [session_topic("", "s1")]


def test_only_topics_some_store_waits_on_are_notified(postgres: Cluster, schema: str) -> None:
    async def body() -> list[str]:
        store = await open_postgresql_store(schema, password=postgres.password, migrate=True)
        try:
            async with await _listener(postgres, schema) as listener:
                await store.create(session("unwatched"))
                await store.append_events(KEY, EventBatch(1, 1, b"e"), expires_at_ms=LATER)
                signal = TurnSignal("h", SignalKind.CANCEL, KEY)
                await store.send_signal(signal, expires_at_ms=LATER)
                await store.wait([session_topic("", "watched")], 0.01)  # registers it
                await store.create(session("watched"))
                return [note.payload async for note in listener.notifies(timeout=1.0, stop_after=1)]
        finally:
            await store.close()

    assert run(body()) == [session_topic("", "watched")]


def test_expire_forgets_topics_nobody_waits_on(postgres: Cluster, schema: str) -> None:
    async def body() -> int:
        store = await open_postgresql_store(schema, password=postgres.password, migrate=True)
        try:
            await store.wait(["a", "b"], 0.01)
            assert _sql(postgres, schema, "SELECT count(*) FROM wake_interest") == [(2,)]
            assert await store.expire(0) == 0
            assert _sql(postgres, schema, "SELECT count(*) FROM wake_interest") == [(2,)]
            return await store.expire(LATER)
        finally:
            await store.close()

    assert run(body()) == 0
    assert _sql(postgres, schema, "SELECT count(*) FROM wake_interest") == [(0,)]


async def _listener(postgres: Cluster, url: str) -> psycopg.AsyncConnection[Any]:
    """A connection of the store's database listening on the store's channel."""
    connection = await psycopg.AsyncConnection.connect(
        postgres.url(), password=postgres.password, autocommit=True
    )
    await connection.execute(f"LISTEN {NOTIFY_CHANNEL}")
    return connection


def test_a_broken_listening_connection_times_out_then_listens_again(
    postgres: Cluster, schema: str
) -> None:
    async def body() -> None:
        waiting = await open_postgresql_store(schema, password=postgres.password, migrate=True)
        writing = await open_postgresql_store(schema, password=postgres.password)
        loop = asyncio.get_running_loop()
        try:
            await settled(waiting, turn_topic(KEY))
            killed = await asyncio.to_thread(
                _sql,
                postgres,
                schema,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                f" WHERE query = 'LISTEN {NOTIFY_CHANNEL}' AND pid <> pg_backend_pid()",
            )
            assert killed == [(True,)]
            for _ in range(3):  # broken or not yet listening: never hangs, never raises
                started = loop.time()
                await waiting.wait([turn_topic(KEY)], 0.3)
                assert loop.time() - started < WAIT
            await settled(waiting, turn_topic(KEY))
            appended = writing.append_events(KEY, EventBatch(1, 1, b"e"), expires_at_ms=LATER)
            await wakes(waiting, turn_topic(KEY), appended)
        finally:
            await waiting.close()
            await writing.close()

    run(body())


def test_a_closed_store_wakes_its_waiters_and_refuses_waits(postgres: Cluster, schema: str) -> None:
    async def body() -> None:
        store = await open_postgresql_store(schema, password=postgres.password, migrate=True)
        await settled(store, turn_topic(KEY))
        waiter = asyncio.ensure_future(store.wait([turn_topic(KEY)], WAIT))
        await until_waiting(store)
        await store.close()
        await asyncio.wait_for(waiter, WAIT)
        with pytest.raises(StoreUnavailableError, match="closed"):
            await store.wait([turn_topic(KEY)], 0.1)

    run(body())
    with pytest.raises(StoreUnavailableError, match="not open"):
        run(PostgresqlStore(schema, password=postgres.password).wait(["t"], 0.1))


def test_concurrent_overlapping_appends_store_no_sequence_twice(
    postgres: Cluster, schema: str
) -> None:
    async def body() -> tuple[list[bool], tuple[EventBatch, ...]]:
        first = await open_postgresql_store(schema, password=postgres.password, migrate=True)
        second = await open_postgresql_store(schema, password=postgres.password)
        try:
            contenders = [
                store.append_events(KEY, EventBatch(1 + n, 3 + n, b"e"), expires_at_ms=LATER)
                for n, store in enumerate([first, second] * 5)
            ]
            results = list(await asyncio.gather(*contenders))
            return results, await first.read_events(KEY)
        finally:
            await first.close()
            await second.close()

    results, stored = run(body())
    assert results.count(True) == len(stored) >= 1
    held = [n for batch in stored for n in range(batch.first, batch.last + 1)]
    assert len(held) == len(set(held))


def test_version_1_keeps_its_sessions_and_gains_live_turns(postgres: Cluster, schema: str) -> None:
    for statement in (
        "CREATE TABLE schema_migrations (version integer PRIMARY KEY,"
        " applied_at timestamptz NOT NULL DEFAULT now())",
        *MIGRATIONS[0],
        "INSERT INTO schema_migrations (version) VALUES (1)",
        "INSERT INTO sessions VALUES ('a', 's1', 'support', 3, 'server', 4, '\\x0102', 1700,"
        " 'inc')",
        "INSERT INTO messages VALUES ('a', 's1', 0, 'm1', 'user', convert_to('hello', 'UTF8'))",
    ):
        _sql(postgres, schema, statement)
    with pytest.raises(StoreUnavailableError, match="older than version"):
        run(open_postgresql_store(schema, password=postgres.password))

    async def body() -> None:
        store = await open_postgresql_store(schema, password=postgres.password, migrate=True)
        try:
            loaded = await store.load("s1", tenant="a")
            assert loaded is not None
            assert (loaded.cursor, loaded.record, loaded.incarnation) == (4, b"\x01\x02", "inc")
            assert [m.content for m in await store.list_messages("s1", tenant="a")] == ["hello"]
            assert [m.tools for m in await store.list_messages("s1", tenant="a")] == [""]
            key = TurnKey("a", "s1", "t1")
            assert await store.append_events(key, EventBatch(1, 2, b"e"), expires_at_ms=LATER)
            assert await store.read_events(key) == (EventBatch(1, 2, b"e"),)
            moved = replace(loaded, cursor=5)
            # The rows of every earlier version get their record's digest (version 5).
            assert not await store.compare_and_set(moved, expected_cursor=4, expected_record=b"")
            assert await store.compare_and_set(
                moved, expected_cursor=4, expected_record=b"\x01\x02"
            )
        finally:
            await store.close()

    run(body())
    versions = _sql(postgres, schema, "SELECT version FROM schema_migrations ORDER BY version")
    assert versions == [(n,) for n in range(1, SCHEMA_VERSION + 1)]
    assert SCHEMA_VERSION == 5


@pytest.mark.parametrize("assignment", ["first_sequence = 5", "first_sequence = 0"])
def test_a_malformed_batch_is_corrupt_and_not_quoted(
    postgres: Cluster, schema: str, assignment: str
) -> None:
    async def seed() -> None:
        store = await open_postgresql_store(schema, password=postgres.password, migrate=True)
        body = CANARY.encode()
        await store.append_events(KEY, EventBatch(1, 2, body), expires_at_ms=LATER)
        await store.close()

    run(seed())
    _sql(postgres, schema, f"UPDATE turn_events SET {assignment}")

    async def read() -> None:
        store = await open_postgresql_store(schema, password=postgres.password)
        try:
            await store.read_events(KEY)
        finally:
            await store.close()

    with pytest.raises(StoreCorruptError) as corrupt:
        run(read())
    assert CANARY not in str(corrupt.value)


def test_a_signal_of_unknown_kind_is_corrupt_and_stays(postgres: Cluster, schema: str) -> None:
    async def seed() -> None:
        store = await open_postgresql_store(schema, password=postgres.password, migrate=True)
        signal = TurnSignal("h", SignalKind.CANCEL, KEY)
        await store.send_signal(signal, expires_at_ms=LATER)
        await store.send_signal(replace(signal, kind=SignalKind.PUBLISH), expires_at_ms=LATER)
        await store.close()

    run(seed())
    _sql(postgres, schema, "UPDATE turn_signals SET kind = 'explode' WHERE kind = 'cancel'")

    async def take() -> None:
        store = await open_postgresql_store(schema, password=postgres.password)
        try:
            await store.take_signals("h")
        finally:
            await store.close()

    with pytest.raises(StoreCorruptError) as corrupt:
        run(take())
    assert "explode" not in str(corrupt.value)
    assert _sql(postgres, schema, "SELECT count(*) FROM turn_signals") == [(2,)]
