"""Session rules that rest on the store, run through the service on every backend: the
lease a turn claims and releases, terminal turns, deletion and re-creation, corrupt records.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from agentskit_chat.conversation import RouteContext, command_route, define_chat, handler_route
from agentskit_chat.service import (
    Catalog,
    ChatService,
    Completed,
    Decided,
    Failed,
    Reason,
    ServiceError,
    Started,
    Submit,
    TurnEvent,
    TurnRequest,
)
from agentskit_chat.storage import HistoryChange, HistoryMode, Store, StoredSession
from tests.service.forwarding import Forwarding

from .conftest import behind, run

KEY = b"storage-contract-digest-key-32by"


@dataclass
class Gate:
    """Holds the route until opened; counts the route's runs."""

    opened: asyncio.Event = field(default_factory=asyncio.Event)
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    runs: int = 0


@asynccontextmanager
async def service(store: Store) -> AsyncIterator[tuple[ChatService, Gate]]:
    gate = Gate()

    async def held(text: str, context: RouteContext) -> bool:
        gate.runs += 1
        gate.entered.set()
        await gate.opened.wait()
        return True

    chat = define_chat(
        id="gated",
        conversation={
            "initial": "a",
            "states": {"a": {"on": {"go": "b"}}, "b": {"on": {"go": "a"}}},
            "routes": [handler_route(id="go", handler=held, event="go", response="went")],
        },
    )
    # Not closed here: closing a service closes its store, which the fixture owns.
    yield ChatService(Catalog([chat]), store, digest_key=KEY), gate


async def turn(chats: ChatService, sid: str, turn_id: str, text: str = "go") -> list[TurnEvent]:
    request = TurnRequest(sid, turn_id, Submit(text))
    return [event async for event in chats.run_turn(request)]


async def refusal(chats: ChatService, sid: str, turn_id: str) -> ServiceError:
    with pytest.raises(ServiceError) as refused:
        await turn(chats, sid, turn_id)
    return refused.value


def test_a_running_turn_holds_the_lease_until_it_ends(store: Store) -> None:
    async def body() -> None:
        async with service(store) as (chats, gate):
            sid = (await chats.create_session("gated", "s1", HistoryMode.SERVER)).session_id
            first = asyncio.ensure_future(turn(chats, sid, "t1"))
            await gate.entered.wait()
            held = await store.load(sid)
            assert held is not None
            assert held.cursor == 1
            busy = await refusal(chats, sid, "t2")
            assert busy.reason is Reason.SESSION_BUSY
            running = await refusal(chats, sid, "t1")
            assert running.reason is Reason.TURN_IN_PROGRESS
            assert await store.load(sid) == held
            gate.opened.set()
            done = (await first)[-1]
            assert isinstance(done, Completed)
            assert done.snapshot.state == "b"
            second = (await turn(chats, sid, "t2"))[-1]
            assert isinstance(second, Completed)
            assert second.snapshot.state == "a"
            assert gate.runs == 2
            messages = (await chats.get_session(sid)).messages
            assert [m.role for m in messages] == ["user", "assistant"] * 2

    run(body())


def test_a_finished_turn_id_replays_its_outcome_without_running_again(store: Store) -> None:
    async def body() -> None:
        async with service(store) as (chats, gate):
            gate.opened.set()
            sid = (await chats.create_session("gated", "s1", HistoryMode.SERVER)).session_id
            first = await turn(chats, sid, "t1")
            stored = await store.load(sid)
            again = await turn(chats, sid, "t1")
            assert gate.runs == 1
            assert isinstance(first[-1], Completed)
            assert isinstance(again[-1], Completed)
            assert again[-1].assistant_message_id == first[-1].assistant_message_id
            assert [e.duplicate for e in again if isinstance(e, Started)] == [True]
            assert [e for e in again if isinstance(e, Decided)] == [
                e for e in first if isinstance(e, Decided)
            ]
            assert await store.load(sid) == stored

    run(body())


def test_a_turn_of_a_deleted_session_never_writes_into_its_successor(store: Store) -> None:
    async def body() -> None:
        async with service(store) as (chats, gate):
            sid = (await chats.create_session("gated", "s1", HistoryMode.SERVER)).session_id
            old = asyncio.ensure_future(turn(chats, sid, "t1"))
            await gate.entered.wait()
            await chats.delete_session(sid)
            await chats.create_session("gated", "s1", HistoryMode.SERVER)
            successor = await store.load(sid)
            gate.opened.set()
            ended = (await old)[-1]
            assert isinstance(ended, Failed)
            assert ended.code == "conflict"
            assert await store.load(sid) == successor
            assert await store.list_messages(sid) == ()
            fresh = (await turn(chats, sid, "t2"))[-1]
            assert isinstance(fresh, Completed)
            assert fresh.snapshot.state == "b"

    run(body())


def test_a_corrupt_record_is_refused_and_left_as_it_is(store: Store) -> None:
    async def body() -> None:
        async with service(store) as (chats, gate):
            gate.opened.set()
            sid = (await chats.create_session("gated", "s1", HistoryMode.SERVER)).session_id
            stored = await store.load(sid)
            assert stored is not None
            garbage = replace(stored, cursor=stored.cursor + 1, record=b"\x00not a record")
            assert await store.compare_and_set(garbage, expected_cursor=stored.cursor)
        async with service(store) as (chats, gate):  # a replica that never cached it
            gate.opened.set()
            for attempt in (
                turn(chats, sid, "t1"),
                chats.get_session(sid),
            ):
                with pytest.raises(ServiceError) as corrupt:
                    await attempt
                assert corrupt.value.reason is Reason.SESSION_CORRUPT
            assert gate.runs == 0
            assert await store.load(sid) == garbage

    run(body())


DECLARED = define_chat(
    id="declared",
    conversation={
        "initial": "a",
        "states": {"a": {"on": {"go": "b"}}, "b": {"on": {"go": "a"}}},
        "routes": [command_route(id="go", command="/go", event="go", response="went")],
    },
)


class HeldWrites(Forwarding):
    """Counts the writes that rest on a record held, not read (`expected_record`), and
    the reads."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.held = self.reads = 0

    async def compare_and_set(
        self,
        session: StoredSession,
        *,
        expected_cursor: int,
        history: HistoryChange | None = None,
        expected_record: bytes | None = None,
    ) -> bool:
        self.held += expected_record is not None
        return await super().compare_and_set(
            session,
            expected_cursor=expected_cursor,
            history=history,
            expected_record=expected_record,
        )

    async def load_with_messages(self, session_id: str, *, tenant: str = "") -> Any:
        self.reads += 1
        return await super().load_with_messages(session_id, tenant=tenant)


@pytest.mark.parametrize("damage", ["garbage", "an earlier record", "a lost message"])
def test_a_held_session_changed_behind_its_cursor_is_refused_as_a_read_one_is(
    store: Store, damage: str
) -> None:
    """A turn a declared route answers rests on the session this process holds, without
    reading it; a row changed in the database behind the cursor makes its one write lose,
    and the turn then meets the same refusal as on a replica that never held the session.
    Nothing is written; once the row is repaired, turns go on."""

    async def body() -> None:
        counted = HeldWrites(store)
        chats = ChatService(Catalog([DECLARED]), counted, digest_key=KEY)
        sid = (await chats.create_session("declared", "s1", HistoryMode.SERVER)).session_id
        created = await store.load(sid)
        assert created is not None
        assert isinstance((await turn(chats, sid, "t1", "/go"))[-1], Completed)
        assert (counted.held, counted.reads) == (1, 0)
        good = await store.load(sid)
        assert good is not None
        messages = await store.list_messages(sid)
        if damage == "a lost message":
            behind(store, sid, drop=1)
        else:
            behind(
                store, sid, record=b"\x00not a record" if damage == "garbage" else created.record
            )
        damaged = (await store.load(sid), await store.list_messages(sid))
        assert damaged[0] is not None
        assert damaged[0].cursor == good.cursor
        held = await refusal_of(chats, sid)
        assert (counted.held, counted.reads) == (2, 0 if damage == "a lost message" else 1)
        replica = ChatService(Catalog([DECLARED]), store, digest_key=KEY)
        read = await refusal_of(replica, sid)
        assert held.reason is Reason.SESSION_CORRUPT
        assert (held.reason, held.metadata) == (read.reason, read.metadata)
        if damage != "a lost message":  # which the commit finds missing, as it did before
            assert held.message == read.message
        assert (
            held.metadata["code"]
            == {
                "garbage": read.metadata["code"],
                "an earlier record": "cursor_mismatch",
                "a lost message": "history_mismatch",
            }[damage]
        )
        assert (await store.load(sid), await store.list_messages(sid)) == damaged
        if damage == "a lost message":
            return  # the refusals of a lost message, and its repair: tests/transport
        behind(store, sid, record=good.record)
        assert isinstance((await turn(chats, sid, "t2", "/go"))[-1], Completed)
        assert len(await store.list_messages(sid)) == len(messages) + 2

    run(body())


async def refusal_of(chats: ChatService, sid: str) -> ServiceError:
    with pytest.raises(ServiceError) as refused:
        await turn(chats, sid, "t9", "/go")
    return refused.value
