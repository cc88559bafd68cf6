"""What a turn a declared route answers reads: nothing when this process holds the session
(its one write then also requires the stored record to be the held bytes), the session
when it does not, or when the write on the held bytes lost; and on PostgreSQL, the
statements that makes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentskit_chat.conversation import command_route, define_chat
from agentskit_chat.service import (
    Catalog,
    ChatService,
    Completed,
    Reason,
    ServiceError,
    Started,
    Submit,
    TurnEvent,
    TurnRequest,
)
from agentskit_chat.storage import (
    DEFAULT_TENANT,
    HistoryChange,
    HistoryMode,
    MemoryStore,
    Store,
    StoredMessage,
    StoredSession,
    StoreUnavailableError,
    open_postgresql_store,
    open_sqlite_store,
)
from tests.postgres import Cluster
from tests.storage.conftest import drop_schema, fresh_schema

from .forwarding import Forwarding

KEY = b"one-write-test-key-32-bytes-long"
SID = "s-cccccccccccccccc"
CHAT = define_chat(
    id="declared",
    conversation={
        "initial": "a",
        "states": {"a": {"on": {"go": "b"}}, "b": {"on": {"go": "a"}}},
        "routes": [command_route(id="go", command="/go", event="go", response="gone")],
    },
)


class Calls(Forwarding):
    """Counts the reads of sessions and the writes, and which writes held their record."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.reads = 0
        self.writes: list[bool] = []
        """Per write: whether it expected a held record."""

    async def load(self, session_id: str, *, tenant: str = DEFAULT_TENANT) -> StoredSession | None:
        self.reads += 1
        return await super().load(session_id, tenant=tenant)

    async def load_with_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> tuple[StoredSession, tuple[StoredMessage, ...]] | None:
        self.reads += 1
        return await super().load_with_messages(session_id, tenant=tenant)

    async def compare_and_set(
        self,
        session: StoredSession,
        *,
        expected_cursor: int,
        history: HistoryChange | None = None,
        expected_record: bytes | None = None,
    ) -> bool:
        self.writes.append(expected_record is not None)
        return await super().compare_and_set(
            session,
            expected_cursor=expected_cursor,
            history=history,
            expected_record=expected_record,
        )


async def _open(kind: str, directory: Path) -> Store:
    if kind == "memory":
        return MemoryStore()
    return await open_sqlite_store(directory / "store.db")


def service(store: Store) -> ChatService:
    return ChatService(Catalog([CHAT]), store, digest_key=KEY)


async def turn(chat: ChatService, turn_id: str, **options: Any) -> list[TurnEvent]:
    request = TurnRequest(SID, turn_id, Submit("/go"), **options)
    return [event async for event in chat.run_turn(request)]


async def completed(chat: ChatService, turn_id: str) -> Completed:
    done = (await turn(chat, turn_id))[-1]
    assert isinstance(done, Completed)
    return done


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_held_session_is_not_read_and_a_stale_one_is_read_once(kind: str, tmp_path: Path) -> None:
    async def scenario() -> None:
        real = await _open(kind, tmp_path)
        here, there = Calls(real), Calls(real)
        chat, replica = service(here), service(there)
        try:
            await chat.create_session("declared", SID, HistoryMode.SERVER)
            for n in range(3):
                assert (await completed(chat, f"t{n}")).cursor == n + 1
            assert (here.reads, here.writes) == (0, [True] * 3)
            # Another replica, which holds nothing, reads; this process's bytes are stale.
            assert (await completed(replica, "r1")).cursor == 4
            assert (there.reads, there.writes) == (1, [False])
            done = await completed(chat, "t3")
            assert done.cursor == 5
            assert (here.reads, here.writes[3:]) == (1, [True, False])
            last = await completed(chat, "t4")
            assert last.cursor == 6  # held again
            assert (here.reads, here.writes[5:]) == (1, [True])
            history = await real.list_messages(SID)
            assert len(history) == 12
            assert history[-1].message_id == last.assistant_message_id
        finally:
            await chat.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_what_a_held_session_would_refuse_or_repeat_is_answered_from_a_read(
    kind: str, tmp_path: Path
) -> None:
    """A repeated turn id, an expected cursor that is not the held one: each is answered
    as the stored session says, read first, and writes nothing."""

    async def scenario() -> None:
        real = await _open(kind, tmp_path)
        here = Calls(real)
        chat = service(here)
        try:
            await chat.create_session("declared", SID, HistoryMode.SERVER)
            first = await completed(chat, "t1")
            again = await turn(chat, "t1")
            assert isinstance(again[0], Started)
            assert again[0].duplicate
            assert again[-1] == first
            with pytest.raises(ServiceError) as stale:
                await turn(chat, "t2", expected_cursor=0)
            assert stale.value.reason == Reason.CONFLICT
            assert (here.reads, here.writes) == (2, [True])
            assert (await completed(chat, "t2")).cursor == 2
        finally:
            await chat.close()

    asyncio.run(scenario())


class Down(Calls):
    """Calls whose reads and writes fail while `down` is set; with `after`, a write fails
    once after it committed (its answer lost on the way back)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.down = self.after = False

    async def load(self, session_id: str, *, tenant: str = DEFAULT_TENANT) -> StoredSession | None:
        if self.down:
            self.reads += 1
            raise StoreUnavailableError("the store is down")
        return await super().load(session_id, tenant=tenant)

    async def load_with_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> tuple[StoredSession, tuple[StoredMessage, ...]] | None:
        if self.down:
            self.reads += 1
            raise StoreUnavailableError("the store is down")
        return await super().load_with_messages(session_id, tenant=tenant)

    async def compare_and_set(
        self,
        session: StoredSession,
        *,
        expected_cursor: int,
        history: HistoryChange | None = None,
        expected_record: bytes | None = None,
    ) -> bool:
        if self.down:
            self.writes.append(expected_record is not None)
            raise StoreUnavailableError("the store is down")
        won = await super().compare_and_set(
            session,
            expected_cursor=expected_cursor,
            history=history,
            expected_record=expected_record,
        )
        if self.after:
            self.after = False
            raise StoreUnavailableError("the answer was lost")
        return won


def test_a_held_turn_meets_an_unavailable_store_as_a_turn_that_reads_first() -> None:
    """Refused UNAVAILABLE before any event while the store is down; a write whose answer
    was lost is found committed by the read that follows, and repeated, not run twice."""

    async def scenario() -> None:
        store = Down(MemoryStore())
        chat = service(store)
        try:
            await chat.create_session("declared", SID, HistoryMode.SERVER)
            store.down = True
            with pytest.raises(ServiceError) as down:
                await turn(chat, "t1")
            assert down.value.reason == Reason.STORE_UNAVAILABLE
            assert (store.reads, store.writes) == (1, [True])
            store.down, store.after = False, True
            answered = await turn(chat, "t1")
            assert isinstance(answered[0], Started)
            assert answered[0].duplicate
            assert isinstance(answered[-1], Completed)
            assert answered[-1].cursor == 1
            # The held write, then the read of the record (new bytes) and of the session.
            assert (store.reads, store.writes) == (3, [True, True])
            assert len(await store.list_messages(SID)) == 2
        finally:
            await chat.close()

    asyncio.run(scenario())


def test_a_declared_turn_on_a_held_session_is_one_statement_on_postgresql(
    postgres: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session's part of the turn is one round trip: the write (then, once the events
    went to the stream, the turn's kept events are written as every committed turn's are).
    A replica that holds nothing reads first, and a held write that lost to it is followed
    by the read and the write."""
    sent: list[str] = []
    execute = psycopg.AsyncCursor.execute

    async def counted(cursor: psycopg.AsyncCursor[Any], query: Any, *args: Any, **kw: Any) -> Any:
        text = str(query)
        if "expires_at_ms <=" not in text:  # the sweep of expired events: no part of a turn
            sent.append(next((name for name in STATEMENTS if name in text), text))
        return await execute(cursor, query, *args, **kw)

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", counted)
    name, url = fresh_schema(postgres)

    async def scenario() -> None:
        store = await open_postgresql_store(url, password=postgres.password, migrate=True)
        chat, replica = service(store), service(store)
        try:
            await chat.create_session("declared", SID, HistoryMode.SERVER)
            for n in range(7):  # statements are prepared after their fifth run
                sent.clear()
                assert (await completed(chat, f"t{n}")).cursor == n + 1
                assert sent == ["save_session", "append_turn_events"]
            sent.clear()
            await completed(replica, "r1")
            assert sent == ["FROM sessions s", "save_session", "append_turn_events"]
            sent.clear()
            await completed(chat, "t7")
            assert sent == ["save_session", "FROM sessions s", "save_session", "append_turn_events"]
        finally:
            await chat.close()

    try:
        asyncio.run(scenario())
    finally:
        drop_schema(postgres, name)


STATEMENTS = ("save_session", "append_turn_events", "FROM sessions s")
"""What names each statement of a turn: its write, its events, the read of the session
with its messages."""
