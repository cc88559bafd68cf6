"""Responses made by route code reach the store sealed under the deployment key."""

from __future__ import annotations

import asyncio

import pytest

from agentskit_chat.conversation import RouteContext, command_route, define_chat
from agentskit_chat.service import (
    Catalog,
    ChatService,
    Completed,
    Reason,
    Retry,
    ServiceError,
    Submit,
    TurnRequest,
)
from agentskit_chat.storage import HistoryMode, MemoryStore

CANARY = "canary-sealed-41fe"
KEY = b"sealed-records-test-key-32-bytes"


def made(text: str, context: RouteContext) -> str:
    return f"made {CANARY}"


CHAT = define_chat(
    id="calls",
    conversation={
        "initial": "a",
        "states": {"a": {"on": {"go": "b"}}, "b": {}},
        "routes": [command_route(id="go", command="/go", event="go", response=made)],
    },
)


def service(store: MemoryStore, key: bytes = KEY) -> ChatService:
    return ChatService(Catalog([CHAT]), store, digest_key=key)


async def last_event(chat: ChatService, request: TurnRequest) -> object:
    return [event async for event in chat.run_turn(request)][-1]


def test_the_stored_record_holds_the_response_only_sealed_and_a_retry_replays_it() -> None:
    async def scenario() -> None:
        store = MemoryStore()
        sid = "s-ffffffffffffffff"
        first = service(store)
        other = service(store)  # another replica: nothing cached, reads the stored record
        await first.create_session("calls", sid, HistoryMode.SERVER)
        await last_event(first, TurnRequest(sid, "t1", Submit("/go")))
        stored = await store.load(sid)
        assert stored is not None
        assert CANARY.encode() not in stored.record
        retried = await last_event(other, TurnRequest(sid, "t2", Retry()))
        assert isinstance(retried, Completed)
        assert retried.content == f"made {CANARY}"

    asyncio.run(scenario())


def test_a_replica_with_another_key_refuses_the_session_and_changes_nothing() -> None:
    async def scenario() -> None:
        store = MemoryStore()
        sid = "s-eeeeeeeeeeeeeeee"
        await service(store).create_session("calls", sid, HistoryMode.SERVER)
        await last_event(service(store), TurnRequest(sid, "t1", Submit("/go")))
        before = await store.load(sid)
        stranger = service(store, b"a-different-deployment-key-32byt")
        with pytest.raises(ServiceError) as refused:
            await stranger.get_session(sid)
        assert refused.value.reason == Reason.SESSION_CORRUPT
        assert refused.value.metadata["code"] == "record_sealed"
        assert await store.load(sid) == before

    asyncio.run(scenario())
