"""A turn runs in a task of its own and publishes into its log; the stream that started it
reads the log, paces the turn, and cancels it by closing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing

import pytest

from agentskit_chat.conversation import command_route, define_chat
from agentskit_chat.service import (
    Catalog,
    ChatService,
    Completed,
    Delta,
    Limits,
    ServiceError,
    Started,
    Submit,
    TurnEvent,
    TurnRequest,
)
from agentskit_chat.service._event_log import MAX_EVENTS
from agentskit_chat.service._live_turns import PACE_EVENTS, LiveTurns
from agentskit_chat.service._terminal import CANCELLED, OUTPUT_LIMIT, failure
from agentskit_chat.service._types import Claim
from agentskit_chat.storage import DEFAULT_TENANT, HistoryMode, MemoryStore

KEY = b"live-turns-test-key-32-bytes-ok!"
CHAT = define_chat(
    id="live",
    conversation={
        "initial": "a",
        "states": {"a": {"on": {"go": "a"}}},
        "routes": [command_route(id="go", command="/go", event="go", response="gone")],
    },
)
REQUEST = TurnRequest("s-1", "t-1", Submit("hi"))


class Endless:
    """A turn that streams deltas until it is closed."""

    def __init__(self) -> None:
        self.produced = 0
        self.closed = asyncio.Event()

    async def events(self, claimed: Callable[[Claim], None]) -> AsyncGenerator[TurnEvent, None]:
        try:
            claimed(Claim("here", 1, client_held=False))
            yield Started("submit", "u-1")
            while True:
                self.produced += 1
                yield Delta("x")
                await asyncio.sleep(0)
        finally:
            await asyncio.sleep(0.01)  # a closing write
            self.closed.set()


def test_a_turn_runs_at_most_its_pace_ahead_of_its_stream_and_closing_it_cancels_it() -> None:
    async def scenario() -> None:
        turn = Endless()
        live = LiveTurns(Limits())
        stream = live.start(REQUEST, turn.events)
        assert await anext(stream) == (1, Started("submit", "u-1"))
        for _ in range(50):
            await asyncio.sleep(0)
        assert 0 < turn.produced <= PACE_EVENTS + 1  # the turn waits for its reader
        assert await anext(stream) == (2, Delta("x"))
        await stream.aclose()
        assert turn.closed.is_set()  # the close returned once the turn ended
        log = live.logs.find((DEFAULT_TENANT, "s-1", "t-1"))
        assert log is not None  # a cancelled turn's log ends with its failure, for watchers
        assert log.ended
        assert log.between(log.last - 1, log.last) == [failure(CANCELLED)]

    asyncio.run(scenario())


def test_a_turns_events_carry_its_sequence_and_its_log_is_kept_after_it() -> None:
    async def scenario() -> None:
        chat = ChatService(Catalog([CHAT]), MemoryStore(), digest_key=KEY)
        session = await chat.create_session("live", None, HistoryMode.SERVER)
        request = TurnRequest(session.session_id, "t-1", Submit("/go"))
        async with aclosing(chat.stream_turn(request)) as stream:
            first = [item async for item in stream]
        assert [sequence for sequence, _ in first] == list(range(1, len(first) + 1))
        assert isinstance(first[-1][1], Completed)
        log = chat.live.logs.find((DEFAULT_TENANT, session.session_id, "t-1"))
        assert log is not None
        assert log.ended
        assert [item async for item in log.read()] == first
        # A repeated id keeps its contract: the recorded outcome, marked duplicate.
        repeated = [event async for event in chat.run_turn(request)]
        assert isinstance(repeated[0], Started)
        assert repeated[0].duplicate
        assert repeated[-1] == first[-1][1]
        assert chat.live.logs.find((DEFAULT_TENANT, session.session_id, "t-1")) is log
        await chat.close()

    asyncio.run(scenario())


def test_a_refused_turn_raises_to_its_stream_and_keeps_no_log() -> None:
    async def scenario() -> None:
        chat = ChatService(Catalog([CHAT]), MemoryStore(), digest_key=KEY)
        with pytest.raises(ServiceError) as refused:
            [event async for event in chat.run_turn(TurnRequest("s-none", "t-1", Submit("/go")))]
        assert refused.value.reason.name == "SESSION_NOT_FOUND"
        assert chat.live.logs.find((DEFAULT_TENANT, "s-none", "t-1")) is None
        await chat.close()

    asyncio.run(scenario())


def test_a_turn_past_its_logs_bound_is_closed_and_fails_with_output_limit() -> None:
    async def scenario() -> None:
        turn = Endless()
        live = LiveTurns(Limits())
        async with aclosing(live.start(REQUEST, turn.events)) as stream:
            events = [event async for _, event in stream]
        assert len(events) == MAX_EVENTS + 1
        assert events[-1] == failure(OUTPUT_LIMIT)
        assert turn.closed.is_set()  # closed before the terminal event: nothing committed
        assert live.logs.find((DEFAULT_TENANT, "s-1", "t-1")) is not None

    asyncio.run(scenario())


def test_a_stream_closed_before_its_first_step_runs_nothing() -> None:
    async def scenario() -> None:
        turn = Endless()
        live = LiveTurns(Limits())
        stream = live.start(REQUEST, turn.events)
        await stream.aclose()
        await asyncio.sleep(0.05)
        assert turn.produced == 0
        assert live.logs.kept == 0

    asyncio.run(scenario())


def test_a_cancel_after_the_terminal_event_changes_nothing() -> None:
    async def scenario() -> None:
        started, completed = Started("submit", "u-1"), Completed("a", "done")

        async def events(claimed: Callable[[Claim], None]) -> AsyncGenerator[TurnEvent, None]:
            claimed(Claim("here", 1, client_held=False))
            yield started
            yield completed
            await asyncio.Event().wait()  # its bookkeeping after the end (a lease release)

        live = LiveTurns(Limits())
        key = (DEFAULT_TENANT, "s-1", "t-1")
        stream = live.start(REQUEST, events)
        assert await anext(stream) == (1, started)
        assert await anext(stream) == (2, completed)
        running = live.running(key)
        assert running is not None
        assert running.task is not None
        watched = asyncio.ensure_future(asyncio.wait_for(_all(running.log.read()), 5))
        assert await live.stop(running) is False
        assert not running.task.done()  # not cancelled
        await stream.aclose()  # its stream leaves before the end: the task is cancelled
        assert await watched == [(1, started), (2, completed)]  # and the log ended well
        log = live.logs.find(key)
        assert log is not None  # kept for watchers
        assert await _all(log.read()) == [(1, started), (2, completed)]

    asyncio.run(scenario())


async def _all(
    events: AsyncGenerator[tuple[int, TurnEvent], None],
) -> list[tuple[int, TurnEvent]]:
    async with aclosing(events) as items:
        return [item async for item in items]
