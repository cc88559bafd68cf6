"""A turn that claims the lease runs in a task of its own and publishes into its log; the
stream that started it reads the log, paces the turn, and cancels it by closing. A turn that
ends without a lease (a declared answer, a repeat, a refusal) runs inline in its stream."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Coroutine, Generator
from contextlib import aclosing
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentskit_chat.conversation import command_route, define_chat
from agentskit_chat.models import AdapterRegistry, ModelChunk, ModelRequest, TextChunk
from agentskit_chat.service import (
    Catalog,
    ChatService,
    Completed,
    Delta,
    Limits,
    Reason,
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
from agentskit_chat.storage import (
    DEFAULT_TENANT,
    HistoryChange,
    HistoryMode,
    MemoryStore,
    StoredSession,
)
from agentskit_chat.telemetry import OtelObserver
from tests.waiting import EVENT_WAIT

from .forwarding import Forwarding

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
ASKING = define_chat(
    id="asking",
    model={"adapter": "echo", "model": "m-1"},
    conversation={
        "initial": "a",
        "states": {"a": {"on": {"go": "a"}}},
        "routes": [command_route(id="go", command="/go", event="go", response="gone")],
    },
)


class Echo:
    """A model that answers at once."""

    name = "echo"
    provider = "tests"

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        yield TextChunk("model answer")

    async def close(self) -> None:
        """Nothing to release."""


class GatedWrites(Forwarding):
    """Holds every compare-and-set until `gate` opens; `writing` is set when one waits."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())
        self.writing = asyncio.Event()
        self.gate = asyncio.Event()

    async def compare_and_set(
        self,
        session: StoredSession,
        *,
        expected_cursor: int,
        history: HistoryChange | None = None,
        expected_record: bytes | None = None,
    ) -> bool:
        self.writing.set()
        await self.gate.wait()
        return await super().compare_and_set(
            session,
            expected_cursor=expected_cursor,
            history=history,
            expected_record=expected_record,
        )


def counting_tasks(loop: asyncio.AbstractEventLoop, names: list[str]) -> None:
    """Name every task `loop` creates from now on in `names`."""

    def factory(
        loop: asyncio.AbstractEventLoop,
        coro: Generator[Any, None, Any] | Coroutine[Any, Any, Any],
        **kwargs: Any,
    ) -> asyncio.Future[Any]:
        names.append(getattr(coro, "__qualname__", ""))
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(factory)


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
        assert asyncio.all_tasks() == {asyncio.current_task()}  # nothing left to run it later
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
        watched = asyncio.ensure_future(asyncio.wait_for(_all(running.log.read()), EVENT_WAIT))
        assert await live.stop(running) is False
        assert not running.task.done()  # not cancelled
        await stream.aclose()  # its stream leaves before the end: the task is cancelled
        assert await watched == [(1, started), (2, completed)]  # and the log ended well
        log = live.logs.find(key)
        assert log is not None  # kept for watchers
        assert await _all(log.read()) == [(1, started), (2, completed)]

    asyncio.run(scenario())


def test_a_turn_a_declared_route_answers_runs_in_its_stream_and_a_model_turn_in_a_task() -> None:
    async def scenario() -> None:
        adapters = AdapterRegistry({"echo": lambda options: Echo()})
        chat = ChatService(Catalog([ASKING]), MemoryStore(), digest_key=KEY, adapters=adapters)
        session = await chat.create_session("asking", None, HistoryMode.SERVER)
        sid = session.session_id
        tasks: list[str] = []
        counting_tasks(asyncio.get_running_loop(), tasks)
        answered = [event async for event in chat.run_turn(TurnRequest(sid, "t-1", Submit("/go")))]
        assert isinstance(answered[-1], Completed)
        # Its one write and its events: all in the stream's task (a sweep of old events may
        # start as the first turn of this process claims).
        assert [name for name in tasks if name != "TurnBus._sweep"] == []
        asked = [event async for event in chat.run_turn(TurnRequest(sid, "t-2", Submit("hi")))]
        assert isinstance(asked[-1], Completed)
        assert asked[-1].content == "model answer"
        assert "LiveTurns._publish" in tasks  # the lease claimed: the turn went on in a task
        for turn_id, events in (("t-1", answered), ("t-2", asked)):
            watched = [event async for _, event in chat.watch_turn(sid, turn_id)]
            assert watched == events  # both logs kept for watchers
        await chat.close()

    asyncio.run(scenario())


def test_spans_of_an_inline_turn_and_of_a_handed_over_turn_nest_as_before(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("tests")

    async def scenario() -> None:
        adapters = AdapterRegistry({"echo": lambda options: Echo()})
        chat = ChatService(
            Catalog([ASKING]),
            MemoryStore(),
            digest_key=KEY,
            adapters=adapters,
            observer=OtelObserver(provider),
        )
        session = await chat.create_session("asking", None, HistoryMode.SERVER)
        for turn_id, text in (("t-1", "/go"), ("t-2", "hi")):
            with tracer.start_as_current_span(f"call {turn_id}") as call:
                request = TurnRequest(session.session_id, turn_id, Submit(text))
                events = [event async for event in chat.run_turn(request)]
                assert isinstance(events[-1], Completed)
                assert trace.get_current_span() is call  # the turn's span did not leak out
        await chat.close()

    with caplog.at_level(logging.ERROR):
        asyncio.run(scenario())
    provider.shutdown()
    assert not caplog.records  # every context the turns made current was restored in place
    finished = spans.get_finished_spans()
    by_name = {span.name: span for span in finished}
    assert sorted(by_name) == ["call t-1", "call t-2", "chat m-1", "chat.turn submit"]
    turns = [span for span in finished if span.name == "chat.turn submit"]
    assert len(turns) == 2
    inline, handed_over = turns
    for turn, call in ((inline, by_name["call t-1"]), (handed_over, by_name["call t-2"])):
        assert turn.parent is not None
        assert turn.parent.span_id == call.context.span_id
    model = by_name["chat m-1"]
    assert model.parent is not None
    assert model.parent.span_id == handed_over.context.span_id


def test_draining_waits_for_an_inline_turns_write_and_a_watcher_meanwhile_finds_no_turn() -> None:
    async def scenario() -> None:
        store = GatedWrites()
        chat = ChatService(Catalog([CHAT]), store, digest_key=KEY)
        store.gate.set()
        session = await chat.create_session("live", None, HistoryMode.SERVER)
        store.gate.clear()
        request = TurnRequest(session.session_id, "t-1", Submit("/go"))
        turn = asyncio.ensure_future(_all(chat.stream_turn(request)))
        await store.writing.wait()
        # Nothing is recorded, and no lease held, while the one write is in flight.
        with pytest.raises(ServiceError) as unknown:
            await _all(chat.watch_turn(session.session_id, "t-1"))
        assert unknown.value.reason == Reason.TURN_NOT_FOUND
        idle = asyncio.ensure_future(chat.turns.wait_idle())
        assert chat.turns.in_flight == 1  # the write is in flight: the wait cannot end
        store.gate.set()
        await asyncio.wait_for(idle, EVENT_WAIT)
        events = await turn
        assert isinstance(events[-1][1], Completed)
        assert await _all(chat.watch_turn(session.session_id, "t-1")) == events
        await chat.close()

    asyncio.run(scenario())


async def _all(
    events: AsyncGenerator[tuple[int, TurnEvent], None],
) -> list[tuple[int, TurnEvent]]:
    async with aclosing(events) as items:
        return [item async for item in items]
