"""A session watch in the service: turns that ran between two reads of it, turns whose
events are gone, and the bound on a watcher that stops reading."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager

import pytest

from agentskit_chat.conversation import command_route, define_chat
from agentskit_chat.models import AdapterRegistry, ModelChunk, ModelRequest, TextChunk
from agentskit_chat.service import (
    Catalog,
    ChatService,
    Completed,
    Delta,
    Reason,
    ServiceError,
    SessionView,
    Started,
    Submit,
    TurnRequest,
)
from agentskit_chat.service._event_log import EventLogs
from agentskit_chat.service._session_watch import (
    Heartbeat,
    WatchedEvent,
    WatchItem,
    WatchSettings,
)
from agentskit_chat.storage import HistoryMode, MemoryStore

KEY = b"session-watch-test-key-32-bytes!"
CHAT = define_chat(
    id="watched",
    model={"adapter": "gated"},
    conversation={
        "initial": "a",
        "states": {"a": {"on": {"go": "a"}}},
        "routes": [command_route(id="go", command="/go", event="go", response="gone")],
    },
)


class Gated:
    """A model that streams one chunk, then waits for its gate, then streams `count` more."""

    name = "gated"
    provider = "tests"

    def __init__(self, count: int = 3) -> None:
        self.gate = asyncio.Event()
        self.count = count

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        yield TextChunk("first ")
        await self.gate.wait()
        for n in range(self.count):
            yield TextChunk(f"{n} ")

    async def close(self) -> None:
        """Nothing to release."""


@asynccontextmanager
async def service(model: Gated, settings: WatchSettings) -> AsyncIterator[ChatService]:
    adapters = AdapterRegistry({"gated": lambda options: model})
    chat = ChatService(Catalog([CHAT]), MemoryStore(), digest_key=KEY, adapters=adapters)
    chat.watch_settings = settings
    try:
        yield chat
    finally:
        await chat.close()


async def turn(chat: ChatService, sid: str, turn_id: str, content: str) -> list[object]:
    request = TurnRequest(sid, turn_id, Submit(content))
    async with aclosing(chat.stream_turn(request)) as events:
        return [event async for _, event in events]


def events_of(items: list[WatchItem], turn_id: str) -> list[WatchedEvent]:
    return [i for i in items if isinstance(i, WatchedEvent) and i.turn_id == turn_id]


async def until_session(watch: AsyncGenerator[WatchItem, None], cursor: int) -> list[WatchItem]:
    items = []
    async for item in watch:
        items.append(item)
        if isinstance(item, SessionView) and item.cursor >= cursor:
            return items
    raise AssertionError("the watch ended")


def test_turns_that_ran_between_two_reads_arrive_in_order_from_their_kept_events() -> None:
    async def scenario() -> None:
        async with service(Gated(), WatchSettings()) as chat:
            sid = (await chat.create_session("watched", None, HistoryMode.SERVER)).session_id
            async with aclosing(chat.watch_session(sid)) as watch:
                first = await anext(watch)
                assert isinstance(first, SessionView)
                assert first.cursor == 0
                # The watch is not read while two turns run and commit (one write each:
                # a declared route answers them).
                await turn(chat, sid, "one", "/go")
                await turn(chat, sid, "two", "/go")
                items = await until_session(watch, 2)
                assert [i.turn_id for i in items if isinstance(i, WatchedEvent)] == [
                    *["one"] * 4,
                    *["two"] * 4,
                ]
                for turn_id in ("one", "two"):
                    events = events_of(items, turn_id)
                    assert [e.sequence for e in events] == [1, 2, 3, 4]
                    assert isinstance(events[0].event, Started)
                    assert not events[0].event.duplicate
                    assert isinstance(events[-1].event, Completed)
                assert isinstance(items[-1], SessionView)
                assert items[-1].cursor == 2

    asyncio.run(scenario())


def test_a_turn_whose_events_are_gone_arrives_as_its_recorded_outcome() -> None:
    async def scenario() -> None:
        async with service(Gated(), WatchSettings()) as chat:
            chat.live.logs = EventLogs(retention=0.0)  # ended turns keep nothing
            sid = (await chat.create_session("watched", None, HistoryMode.SERVER)).session_id
            async with aclosing(chat.watch_session(sid)) as watch:
                await anext(watch)
                await turn(chat, sid, "gone", "/go")
                items = await until_session(watch, 1)
                events = events_of(items, "gone")
                assert isinstance(events[0].event, Started)
                assert events[0].event.duplicate
                assert [e.sequence for e in events] == list(range(1, len(events) + 1))
                assert [e.event.text for e in events if isinstance(e.event, Delta)] == ["gone"]
                assert isinstance(events[-1].event, Completed)

    asyncio.run(scenario())


def test_a_watcher_that_stops_reading_lets_go_of_the_turn_and_ends_behind() -> None:
    async def scenario() -> None:
        model = Gated(count=50)
        async with service(model, WatchSettings(heartbeat=60, behind=0.1)) as chat:
            sid = (await chat.create_session("watched", None, HistoryMode.SERVER)).session_id
            async with aclosing(chat.watch_session(sid)) as watch:
                await anext(watch)
                running = asyncio.ensure_future(turn(chat, sid, "long", "hello"))
                items = []
                async for item in watch:  # up to the first delta, then stop reading
                    items.append(item)
                    if isinstance(item, WatchedEvent) and isinstance(item.event, Delta):
                        break
                claimed = [i.cursor for i in items if isinstance(i, SessionView)]
                assert claimed == [1]
                model.gate.set()
                events = await running  # the turn does not wait for the watcher
                assert isinstance(events[-1], Completed)
                await asyncio.sleep(0.3)  # longer than the bound: a bound, not a timing
                with pytest.raises(ServiceError) as behind:
                    await anext(watch)
                assert behind.value.reason == Reason.WATCH_BEHIND
                assert behind.value.metadata == {"cursor": "1"}

    asyncio.run(scenario())


def test_a_watch_and_a_turn_watch_each_count_as_a_watcher_until_they_end() -> None:
    async def scenario() -> None:
        async with service(Gated(), WatchSettings()) as chat:
            sid = (await chat.create_session("watched", None, HistoryMode.SERVER)).session_id
            async with aclosing(chat.watch_session(sid)) as watch:
                await anext(watch)
                assert chat.watchers.count("", sid) == 1
            assert chat.watchers.count("", sid) == 0
            with pytest.raises(ServiceError) as unknown:
                await anext(chat.watch_session("nobody"))
            assert unknown.value.reason == Reason.SESSION_NOT_FOUND
            assert chat.watchers.count("") == 0

    asyncio.run(scenario())


def test_heartbeats_keep_coming_while_nothing_happens() -> None:
    async def scenario() -> None:
        async with service(Gated(), WatchSettings(heartbeat=0.05)) as chat:
            sid = (await chat.create_session("watched", None, HistoryMode.SERVER)).session_id
            async with aclosing(chat.watch_session(sid)) as watch:
                await anext(watch)
                beats = [await anext(watch) for _ in range(3)]
                assert all(isinstance(b, Heartbeat) for b in beats)

    asyncio.run(scenario())


def test_a_draining_service_ends_its_watches_and_refuses_new_ones() -> None:
    async def scenario() -> None:
        async with service(Gated(), WatchSettings(heartbeat=0.05)) as chat:
            sid = (await chat.create_session("watched", None, HistoryMode.SERVER)).session_id
            async with aclosing(chat.watch_session(sid)) as watch:
                await anext(watch)
                chat.begin_drain()
                with pytest.raises(ServiceError) as ended:
                    await drained(watch)
                assert ended.value.reason == Reason.SHUTTING_DOWN
            with pytest.raises(ServiceError) as refused:
                await anext(chat.watch_session(sid))
            assert refused.value.reason == Reason.SHUTTING_DOWN

    asyncio.run(scenario())


async def drained(watch: AsyncGenerator[WatchItem, None]) -> None:
    """Read heartbeats until the watch ends."""
    async for item in watch:
        assert isinstance(item, Heartbeat)
