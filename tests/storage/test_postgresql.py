"""PostgreSQL-only behaviour: schema migrations, corrupt rows, outages and several stores."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace

import pytest

from agentskit_chat.storage import (
    HistoryChange,
    PostgresqlStore,
    StoreCorruptError,
    StoredMessage,
    StoreUnavailableError,
    open_postgresql_store,
    open_store,
)
from agentskit_chat.storage.postgresql import MIGRATIONS, SCHEMA_VERSION
from tests.postgres import Cluster, free_port
from tests.waiting import EVENT_WAIT

from .conftest import drop_schema, fresh_schema, message, run, session

CANARY = "canary-5d1e8b-secret-message-text"


@pytest.fixture
def schema(postgres: Cluster) -> Iterator[str]:
    """The store URL of an empty schema of its own."""
    name, url = fresh_schema(postgres)
    try:
        yield url
    finally:
        drop_schema(postgres, name)


def _open_and_close(url: str, password: str, *, migrate: bool = False) -> None:
    async def body() -> None:
        store = await open_postgresql_store(url, password=password, migrate=migrate)
        await store.close()

    run(body())


def _sql(postgres: Cluster, url: str, statement: str) -> list[tuple[object, ...]]:
    schema = url.rsplit("%3D", 1)[1]
    with postgres.connect() as connection:
        connection.execute(f"SET search_path = {schema}")
        cursor = connection.execute(statement)
        return cursor.fetchall() if cursor.description else []


def test_an_unmigrated_database_is_refused_until_migrated(postgres: Cluster, schema: str) -> None:
    with pytest.raises(StoreUnavailableError, match="no schema; run `agentskit-chat migrate`"):
        run(open_postgresql_store(schema, password=postgres.password))

    async def migrate() -> tuple[tuple[int, int], tuple[int, int]]:
        store = PostgresqlStore(schema, password=postgres.password)
        try:
            return await store.migrate(), await store.migrate()
        finally:
            await store.close()

    assert run(migrate()) == ((0, SCHEMA_VERSION), (SCHEMA_VERSION, SCHEMA_VERSION))
    versions = _sql(postgres, schema, "SELECT version FROM schema_migrations ORDER BY version")
    assert versions == [(n,) for n in range(1, SCHEMA_VERSION + 1)]
    _open_and_close(schema, postgres.password)


def test_a_newer_schema_is_refused_and_an_older_one_asks_for_migrate(
    postgres: Cluster, schema: str
) -> None:
    _open_and_close(schema, postgres.password, migrate=True)
    _sql(postgres, schema, f"INSERT INTO schema_migrations VALUES ({SCHEMA_VERSION + 1})")
    with pytest.raises(StoreUnavailableError, match=f"schema version {SCHEMA_VERSION + 1}"):
        run(open_postgresql_store(schema, password=postgres.password, migrate=True))
    _sql(postgres, schema, "DELETE FROM schema_migrations")
    with pytest.raises(StoreUnavailableError, match="older than version"):
        run(open_postgresql_store(schema, password=postgres.password))


def test_replicas_migrating_together_apply_each_version_once(
    postgres: Cluster, schema: str
) -> None:
    async def body() -> list[tuple[int, int]]:
        stores = [PostgresqlStore(schema, password=postgres.password) for _ in range(4)]
        try:
            return list(await asyncio.gather(*(store.migrate() for store in stores)))
        finally:
            for store in stores:
                await store.close()

    results = run(body())
    assert sorted(results) == [(0, SCHEMA_VERSION)] + [(SCHEMA_VERSION, SCHEMA_VERSION)] * 3


def test_open_store_selects_postgresql_by_url(postgres: Cluster, schema: str) -> None:
    async def body() -> None:
        store = await open_store(schema, password=postgres.password, migrate=True)
        try:
            assert isinstance(store, PostgresqlStore)
            await store.create(session())
            assert await store.load("s1") == session()
        finally:
            await store.close()

    run(body())
    assert _sql(postgres, schema, "SELECT tenant, session_id, cursor FROM sessions") == [
        ("", "s1", 0)
    ]


def test_rows_that_do_not_read_back_are_corrupt_and_not_quoted(
    postgres: Cluster, schema: str
) -> None:
    async def seed() -> None:
        store = await open_postgresql_store(schema, password=postgres.password, migrate=True)
        try:
            await store.create(session())
            change = HistoryChange(0, (message(1, CANARY),))
            assert await store.compare_and_set(session(cursor=1), expected_cursor=0, history=change)
        finally:
            await store.close()

    run(seed())
    _sql(postgres, schema, "UPDATE messages SET content = content || '\\xff'::bytea")
    _sql(postgres, schema, f"UPDATE sessions SET history_mode = '{CANARY}'")

    async def read(what: str) -> object:
        store = await open_postgresql_store(schema, password=postgres.password)
        try:
            if what == "session":
                return await store.load("s1")
            return await store.list_messages("s1")
        finally:
            await store.close()

    for what in ("session", "messages"):
        with pytest.raises(StoreCorruptError) as corrupt:
            run(read(what))
        assert CANARY not in str(corrupt.value)


def test_a_server_that_cannot_be_reached_is_unavailable_without_the_password() -> None:
    url = f"postgresql://alice:hunter2-secret@127.0.0.1:{free_port()}/chat"
    with pytest.raises(StoreUnavailableError, match="connect failed") as refused:
        run(open_postgresql_store(url, timeout=1.0))
    assert "hunter2" not in str(refused.value)
    with pytest.raises(StoreUnavailableError) as refused:
        run(open_postgresql_store(url.replace(":hunter2-secret", ""), password="hunter2-secret"))
    assert "hunter2" not in str(refused.value)


def test_a_wrong_password_is_refused_without_echoing_it(postgres: Cluster) -> None:
    with pytest.raises(StoreUnavailableError, match="password authentication failed") as refused:
        run(open_postgresql_store(postgres.url(), password="hunter2-wrong"))
    assert "hunter2" not in str(refused.value)
    assert postgres.password not in str(refused.value)


def test_two_stores_on_one_database_have_one_winner(postgres: Cluster, schema: str) -> None:
    async def body() -> list[bool]:
        first = await open_postgresql_store(schema, password=postgres.password, migrate=True)
        second = await open_postgresql_store(schema, password=postgres.password)
        try:
            await first.create(session())
            contenders = [
                store.compare_and_set(
                    session(cursor=1, record=f"{n}".encode()),
                    expected_cursor=0,
                    history=HistoryChange(0, (message(n),)),
                )
                for n, store in enumerate([first, second] * 4)
            ]
            results = list(await asyncio.gather(*contenders))
            winner = results.index(True)
            assert await second.load("s1") == session(cursor=1, record=f"{winner}".encode())
            assert list(await first.list_messages("s1")) == [message(winner)]
            return results
        finally:
            await first.close()
            await second.close()

    assert run(body()).count(True) == 1


def test_a_server_restart_is_unavailable_then_recovers_without_reopening(
    postgres: Cluster, schema: str
) -> None:
    async def body() -> None:
        store = await open_postgresql_store(
            schema, password=postgres.password, migrate=True, timeout=1.0
        )
        try:
            await store.create(session())
            await asyncio.to_thread(postgres.halt)
            with pytest.raises(StoreUnavailableError) as outage:
                await store.load("s1")
            assert postgres.password not in str(outage.value)
            with pytest.raises(StoreUnavailableError):
                await store.compare_and_set(session(cursor=1), expected_cursor=0)
            await asyncio.to_thread(postgres.run_server)
            give_up = time.monotonic() + EVENT_WAIT
            while True:
                try:
                    loaded = await store.load("s1")
                    break
                except StoreUnavailableError:
                    assert time.monotonic() < give_up, "the store never recovered"
                    await asyncio.sleep(0.1)
            assert loaded == session()
            assert await store.compare_and_set(session(cursor=1), expected_cursor=0)
        finally:
            await store.close()

    run(body())


def test_version_2_keeps_its_messages_and_then_stores_tools(postgres: Cluster, schema: str) -> None:
    for statement in (
        "CREATE TABLE schema_migrations (version integer PRIMARY KEY,"
        " applied_at timestamptz NOT NULL DEFAULT now())",
        *MIGRATIONS[0],
        *MIGRATIONS[1],
        "INSERT INTO schema_migrations (version) VALUES (1), (2)",
        "INSERT INTO sessions VALUES ('a', 's1', 'support', 3, 'server', 4, '\\x0102', 1700,"
        " 'inc')",
        "INSERT INTO messages VALUES ('a', 's1', 0, 'm1', 'user', convert_to('hello', 'UTF8')),"
        " ('a', 's1', 1, 'm2', 'assistant', convert_to('hi', 'UTF8'))",
    ):
        _sql(postgres, schema, statement)
    with pytest.raises(StoreUnavailableError, match="older than version"):
        run(open_postgresql_store(schema, password=postgres.password))
    calls = '{"calls":[["c1","lookup","{\\"order\\":\\"A-1\\"}"]]}'
    answer = '{"call":"c1"}'

    async def migrate() -> None:
        store = await open_postgresql_store(schema, password=postgres.password, migrate=True)
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

    run(migrate())
    versions = _sql(postgres, schema, "SELECT version FROM schema_migrations ORDER BY version")
    assert versions == [(n,) for n in range(1, SCHEMA_VERSION + 1)]
    assert SCHEMA_VERSION == 5

    async def reopened() -> tuple[Sequence[StoredMessage], tuple[StoredMessage, ...]]:
        store = await open_postgresql_store(schema, password=postgres.password)
        try:
            found = await store.load_with_messages("s1", tenant="a")
            assert found is not None
            return await store.list_messages("s1", tenant="a"), found[1]
        finally:
            await store.close()

    expected = (
        StoredMessage("m1", "user", "hello"),
        StoredMessage("m3", "assistant", "", calls),
        StoredMessage("m4", "tool", "42", answer),
    )
    assert run(reopened()) == (expected, expected)


def test_the_previous_save_session_still_saves_after_the_migration(
    postgres: Cluster, schema: str
) -> None:
    # A replica of the previous version, still running while the others are replaced.
    _open_and_close(schema, postgres.password, migrate=True)
    _sql(postgres, schema, "INSERT INTO sessions VALUES ('', 's1', 'd', 1, 'server', 0, '', 1, '')")
    saved = _sql(
        postgres,
        schema,
        "SELECT save_session('', 's1', 'd', 1, 'server', 1, '\\x01', 2, 0, '', 0,"
        " ARRAY['m1'], ARRAY['user'], ARRAY[convert_to('hello', 'UTF8')])",
    )
    assert saved == [(True,)]

    async def read() -> list[StoredMessage]:
        store = await open_postgresql_store(schema, password=postgres.password)
        try:
            return list(await store.list_messages("s1"))
        finally:
            await store.close()

    assert run(read()) == [StoredMessage("m1", "user", "hello")]


def test_version_4_rows_gain_the_digest_of_their_record(postgres: Cluster, schema: str) -> None:
    for statement in (
        "CREATE TABLE schema_migrations (version integer PRIMARY KEY,"
        " applied_at timestamptz NOT NULL DEFAULT now())",
        *(statement for migration in MIGRATIONS[:4] for statement in migration),
        "INSERT INTO schema_migrations (version) VALUES (1), (2), (3), (4)",
        "INSERT INTO sessions VALUES ('', 's1', 'd', 1, 'server', 4, '\\x0102', 1, 'inc'),"
        " ('', 's2', 'd', 1, 'server', 0, '', 1, 'inc')",
    ):
        _sql(postgres, schema, statement)
    _open_and_close(schema, postgres.password, migrate=True)
    digests = _sql(postgres, schema, "SELECT session_id, record_digest FROM sessions ORDER BY 1")
    assert digests == [
        ("s1", hashlib.sha256(b"\x01\x02").digest()),
        ("s2", hashlib.sha256(b"").digest()),
    ]
    # A replica of the previous version writes through its own save_session: the column
    # follows the record all the same.
    saved = _sql(
        postgres,
        schema,
        "SELECT save_session('', 's2', 'd', 1, 'server', 1, '\\x03', 2, 0, 'inc', 0,"
        " ARRAY['m1'], ARRAY['user'], ARRAY[convert_to('hello', 'UTF8')], ARRAY[''])",
    )
    assert saved == [(True,)]

    async def held_writes() -> list[bool]:
        store = await open_postgresql_store(schema, password=postgres.password)
        try:
            first = await store.load("s1")
            second = await store.load("s2")
            assert first is not None
            assert second is not None
            return [
                await store.compare_and_set(
                    replace(first, cursor=5), expected_cursor=4, expected_record=b"\x01"
                ),
                await store.compare_and_set(
                    replace(first, cursor=5), expected_cursor=4, expected_record=b"\x01\x02"
                ),
                await store.compare_and_set(
                    replace(second, cursor=2, record=b"\x04"),
                    expected_cursor=1,
                    history=HistoryChange(1),
                    expected_record=b"\x03",
                ),
            ]
        finally:
            await store.close()

    assert run(held_writes()) == [False, True, True]
    rows = _sql(postgres, schema, "SELECT record, record_digest FROM sessions ORDER BY session_id")
    assert rows == [(record, hashlib.sha256(record).digest()) for record in (b"\x01\x02", b"\x04")]


def test_a_record_changed_behind_the_cursor_fails_a_write_expecting_the_old_one(
    postgres: Cluster, schema: str
) -> None:
    async def create() -> None:
        store = await open_postgresql_store(schema, password=postgres.password, migrate=True)
        try:
            await store.create(session(record=b"held"))
        finally:
            await store.close()

    run(create())
    _sql(postgres, schema, "UPDATE sessions SET record = '\\x00'")  # the cursor stays 0

    async def write() -> tuple[bool, object]:
        store = await open_postgresql_store(schema, password=postgres.password)
        try:
            change = HistoryChange(0, (message(1),))
            won = await store.compare_and_set(
                session(cursor=1), expected_cursor=0, history=change, expected_record=b"held"
            )
            won = won or await store.compare_and_set(
                session(cursor=1), expected_cursor=0, expected_record=b"held"
            )
            return won, await store.load_with_messages("s1")
        finally:
            await store.close()

    assert run(write()) == (False, (session(record=b"\x00"), ()))
