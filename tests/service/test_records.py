"""Which calls read a session's history: only those that use it, and with the record."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from agentskit_chat.conversation import RouteContext, command_route, define_chat
from agentskit_chat.service import Catalog, ChatService, Completed, Submit, TurnRequest
from agentskit_chat.storage import (
    DEFAULT_TENANT,
    HistoryMode,
    MemoryStore,
    Store,
    StoredMessage,
    StoredSession,
    open_sqlite_store,
)
from tests.service.forwarding import Forwarding

KEY = b"records-test-key-32-bytes-long!!"
LONG = "x" * 64 * 1024


def long_answer(text: str, context: RouteContext) -> str:
    return LONG


CHAT = define_chat(
    id="records",
    conversation={
        "initial": "a",
        "states": {"a": {"on": {"go": "a"}}},
        "routes": [command_route(id="go", command="/go", event="go", response=long_answer)],
    },
)


class Counted(Forwarding):
    """A real store, and how many times the history was read through it."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.history_reads = 0

    async def load_with_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> tuple[StoredSession, tuple[StoredMessage, ...]] | None:
        self.history_reads += 1
        return await super().load_with_messages(session_id, tenant=tenant)

    async def list_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> Sequence[StoredMessage]:
        self.history_reads += 1
        return await super().list_messages(session_id, tenant=tenant)


async def _open(kind: str, directory: Path) -> Store:
    if kind == "memory":
        return MemoryStore()
    return await open_sqlite_store(directory / "store.db")


async def _turn(chat: ChatService, sid: str, turn_id: str) -> None:
    events = [event async for event in chat.run_turn(TurnRequest(sid, turn_id, Submit("/go")))]
    assert isinstance(events[-1], Completed)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_turn_lookups_read_no_history_and_history_readers_read_it_with_the_record(
    kind: str, tmp_path: Path
) -> None:
    async def scenario() -> None:
        store = Counted(await _open(kind, tmp_path))
        try:
            writer = ChatService(Catalog([CHAT]), store, digest_key=KEY)
            reader = ChatService(Catalog([CHAT]), store, digest_key=KEY)  # another replica
            sid = "s-bbbbbbbbbbbbbbbb"
            await writer.create_session("records", sid, HistoryMode.SERVER)
            await _turn(writer, sid, "t1")
            store.history_reads = 0
            for n in (2, 3):  # nothing cached, then the writer commits: stale each time
                assert (await reader.get_turn(sid, "t1")).outcome == "completed"
                assert len((await reader.list_turns(sid)).turns) >= 1
                await _turn(writer, sid, f"t{n}")
            assert store.history_reads == 0  # and the writer's turns use its cached history
            history = await reader.get_session(sid)
            assert [m.content for m in history.messages][1::2] == [LONG] * 3
            assert store.history_reads == 1
            await reader.get_session(sid)  # the cache holds the history of these bytes
            assert store.history_reads == 1
        finally:
            await store.close()

    asyncio.run(scenario())
