"""A repeated turn id streams its whole recorded outcome, whatever commits meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from agentskit_chat.conversation import RouteContext, command_route, define_chat
from agentskit_chat.service import (
    Catalog,
    ChatService,
    Completed,
    Decided,
    Delta,
    Started,
    Submit,
    TurnEvent,
    TurnRequest,
)
from agentskit_chat.storage import HistoryMode, MemoryStore, Store, open_sqlite_store

KEY = b"repeats-test-key-32-bytes-long!!"


def echo(text: str, context: RouteContext) -> str:
    return f"answer to {context.message_id}"  # each turn's answer differs


CHAT = define_chat(
    id="repeats",
    conversation={
        "initial": "a",
        "states": {"a": {"on": {"go": "a"}}},
        "routes": [command_route(id="go", command="/go", event="go", response=echo)],
    },
)

Opener = Callable[[Path], Awaitable[Store]]


async def _memory(directory: Path) -> Store:
    return MemoryStore()


async def _sqlite(directory: Path) -> Store:
    return await open_sqlite_store(directory / "store.db")


@pytest.fixture(params=["memory", "sqlite"])
def opener(request: pytest.FixtureRequest) -> Opener:
    return _memory if request.param == "memory" else _sqlite


async def _all(chat: ChatService, request: TurnRequest) -> list[TurnEvent]:
    return [event async for event in chat.run_turn(request)]


def test_a_repeat_streams_its_outcome_while_another_turn_commits_between_its_events(
    opener: Opener, tmp_path: Path
) -> None:
    async def scenario() -> None:
        store = await opener(tmp_path)
        try:
            chat = ChatService(Catalog([CHAT]), store, digest_key=KEY)
            sid = "s-aaaaaaaaaaaaaaaa"
            await chat.create_session("repeats", sid, HistoryMode.SERVER)
            first = await _all(chat, TurnRequest(sid, "t1", Submit("/go")))
            started, done = first[0], first[-1]
            assert isinstance(started, Started)
            assert isinstance(done, Completed)
            repeated = chat.run_turn(TurnRequest(sid, "t1", Submit("/go")))
            events: list[TurnEvent] = []
            # The consumer waits (a network send) between events; meanwhile turns commit.
            async for event in repeated:
                events.append(event)
                if not isinstance(event, Completed):
                    n = len(events)
                    later = await _all(chat, TurnRequest(sid, f"t{n + 1}", Submit("/go")))
                    assert isinstance(later[-1], Completed)
            assert isinstance(events[0], Started)
            assert events[0].duplicate
            assert isinstance(events[1], Decided)
            assert events[2:] == [Delta(done.content), done]
            assert done.content == f"answer to {started.user_message_id}"
        finally:
            await store.close()

    asyncio.run(scenario())
