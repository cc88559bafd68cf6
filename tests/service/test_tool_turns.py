"""A model answer's tool calls: streamed, stored, waited on, and continued by their results.

Routes match user input only: a turn that carries tool results goes to the model, never
through the routes. Results that do not answer exactly the calls the last answer waits on
are refused with a specific reason, and nothing is stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path

import pytest

from agentskit_chat.conversation import (
    Message,
    Role,
    RouteContext,
    ToolCall,
    define_chat,
    handler_route,
)
from agentskit_chat.models import (
    AdapterRegistry,
    FinishChunk,
    ModelChunk,
    ModelRequest,
    TextChunk,
    ToolCallDeltaChunk,
    ToolCallStartChunk,
    ToolOptions,
    ToolSpec,
)
from agentskit_chat.service import (
    Approval,
    Catalog,
    ChatService,
    Completed,
    Decided,
    Dispatch,
    Failed,
    Limits,
    Reason,
    ServiceError,
    Started,
    Submit,
    ToolDelta,
    ToolEnded,
    ToolResult,
    ToolResults,
    ToolStarted,
    TurnEvent,
    TurnRequest,
)
from agentskit_chat.storage import HistoryMode, MemoryStore, Store, open_sqlite_store

KEY = b"tools-test-key-32-bytes-long!!!!"
SID = "s-tools-aaaaaaaa"
CANARY = "CANARY-7f3a-tool-content"
TOOLS = ToolOptions((ToolSpec("weather", "The weather", {"type": "object"}),), "auto", True)


class Matches:
    """A route matcher that counts the inputs it sees and never matches."""

    def __init__(self) -> None:
        self.inputs = 0

    def __call__(self, text: str, context: RouteContext) -> bool:
        self.inputs += 1
        return False


class Scripted:
    """A model that answers each request with the next scripted chunks, recording requests."""

    name = "scripted"
    provider = "tests"

    def __init__(self, *answers: list[ModelChunk]) -> None:
        self.answers = list(answers)
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        self.requests.append(request)
        for chunk in self.answers.pop(0):
            yield chunk

    async def close(self) -> None:
        """Nothing to release."""


def two_calls() -> list[ModelChunk]:
    """Two calls whose argument deltas interleave, then `tool_calls`."""
    return [
        TextChunk("Let me look."),
        ToolCallStartChunk(0, "call-a", "weather"),
        ToolCallStartChunk(1, "call-b", "weather"),
        ToolCallDeltaChunk("call-a", '{"city":'),
        ToolCallDeltaChunk("call-b", '{"city":"Oslo"}'),
        ToolCallDeltaChunk("call-a", f'"{CANARY}"}}'),
        FinishChunk("tool_calls"),
    ]


def final() -> list[ModelChunk]:
    return [TextChunk("Sunny in both."), FinishChunk("stop")]


Opener = Callable[[Path], Awaitable[Store]]


async def _memory(directory: Path) -> Store:
    return MemoryStore()


async def _sqlite(directory: Path) -> Store:
    return await open_sqlite_store(directory / "store.db")


@pytest.fixture(params=["memory", "sqlite"])
def opener(request: pytest.FixtureRequest) -> Opener:
    return _memory if request.param == "memory" else _sqlite


def service(
    store: Store, model: Scripted, matcher: Matches, limits: Limits | None = None
) -> ChatService:
    chat = define_chat(
        id="tools",
        model={"adapter": "scripted"},
        conversation={
            "initial": "a",
            "states": {"a": {"on": {"go": "a"}}},
            "routes": [handler_route(id="any", handler=matcher, event="go", response="route")],
        },
    )
    adapters = AdapterRegistry({"scripted": lambda options: model})
    return ChatService(
        Catalog([chat]), store, digest_key=KEY, adapters=adapters, limits=limits or Limits()
    )


async def run(chat: ChatService, request: TurnRequest) -> list[TurnEvent]:
    return [event async for event in chat.run_turn(request)]


def turn(turn_id: str, operation: Submit | ToolResults | Dispatch) -> TurnRequest:
    return TurnRequest(SID, turn_id, operation, tools=TOOLS)


def test_a_tool_round_streams_the_calls_waits_and_continues_past_the_routes(
    opener: Opener, tmp_path: Path
) -> None:
    async def scenario() -> None:
        store = await opener(tmp_path)
        model, matcher = Scripted(two_calls(), final()), Matches()
        chat = service(store, model, matcher)
        try:
            await chat.create_session("tools", SID, HistoryMode.SERVER)
            first = await run(chat, turn("t1", Submit("weather in two cities?")))
            assert [type(e) for e in first] == [
                Started,
                Decided,
                type(first[2]),  # the text delta
                ToolStarted,
                ToolStarted,
                ToolDelta,
                ToolDelta,
                ToolDelta,
                ToolEnded,
                ToolEnded,
                Completed,
            ]
            assert model.requests[0].tools == TOOLS
            done = first[-1]
            assert isinstance(done, Completed)
            assert done.finish_reason == "tool_calls"
            assert [c.id for c in done.tool_calls] == ["call-a", "call-b"]
            assert done.tool_calls[0].arguments == f'{{"city":"{CANARY}"}}'
            assert [(p.call_id, p.wait) for p in done.pending] == [
                ("call-a", "result"),
                ("call-b", "result"),
            ]
            view = await chat.get_turn(SID, "t1")
            assert [p.call_id for p in view.pending] == ["call-a", "call-b"]
            history = await chat.get_session(SID)
            answer = history.messages[-1]
            assert answer.tool_calls == done.tool_calls
            assert matcher.inputs == 1

            results = ToolResults((ToolResult("call-b", "rain"), ToolResult("call-a", "sun")))
            second = await run(chat, turn("t2", results))
            assert matcher.inputs == 1  # the routes never saw the continuation
            decided = next(e for e in second if isinstance(e, Decided))
            assert decided.kind == "agentic"
            closing = second[-1]
            assert isinstance(closing, Completed)
            assert closing.content == "Sunny in both."
            assert closing.pending == ()
            sent = model.requests[1].messages
            assert [(m.role, m.tool_call_id, m.content) for m in sent[-2:]] == [
                (Role.TOOL, "call-a", "sun"),  # in the order of the calls
                (Role.TOOL, "call-b", "rain"),
            ]
            assert sent[-3].tool_calls == done.tool_calls
            stored = await chat.get_session(SID)
            roles = [m.role for m in stored.messages]
            assert roles == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL, Role.ASSISTANT]
            assert (await chat.get_turn(SID, "t2")).operation == "tool_results"
        finally:
            await chat.close()

    asyncio.run(scenario())


def test_a_repeated_tool_turn_id_returns_the_recorded_calls_without_the_model(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        model = Scripted(two_calls())
        chat = service(MemoryStore(), model, Matches())
        try:
            await chat.create_session("tools", SID, HistoryMode.SERVER)
            first = await run(chat, turn("t1", Submit("weather?")))
            again = await run(chat, turn("t1", Submit("weather?")))
            assert len(model.requests) == 1
            started = again[0]
            assert isinstance(started, Started)
            assert started.duplicate
            ended = [e for e in again if isinstance(e, ToolEnded)]
            assert [(e.call_id, e.arguments) for e in ended] == [
                (e.call_id, e.arguments) for e in first if isinstance(e, ToolEnded)
            ]
            done = again[-1]
            assert isinstance(done, Completed)
            assert done.finish_reason == "tool_calls"
            assert [p.call_id for p in done.pending] == ["call-a", "call-b"]
        finally:
            await chat.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("operation", "reason", "field"),
    [
        (
            ToolResults((ToolResult("call-a", "x"), ToolResult("nope", "y"))),
            Reason.TOOL_CALL_UNKNOWN,
            "tool_results.results[1].tool_call_id",
        ),
        (
            ToolResults((ToolResult("call-a", "x"), ToolResult("call-a", "y"))),
            Reason.TOOL_CALL_UNKNOWN,
            "tool_results.results[1].tool_call_id",
        ),
        (
            ToolResults((ToolResult("call-a", "x"),)),
            Reason.TOOL_CALLS_UNANSWERED,
            "tool_call:call-b",
        ),
        (
            ToolResults(
                (ToolResult("call-a", "x"), ToolResult("call-b", "y")),
                (Approval("call-a", True),),
            ),
            Reason.TOOL_CALL_UNKNOWN,  # call-a waits for a result, not for approval
            "tool_results.approvals[0].tool_call_id",
        ),
    ],
    ids=["unknown", "twice", "unanswered", "approval-of-a-result-call"],
)
def test_results_that_do_not_answer_the_pending_calls_are_refused_and_store_nothing(
    operation: ToolResults, reason: Reason, field: str
) -> None:
    async def scenario() -> None:
        store = MemoryStore()
        chat = service(store, Scripted(two_calls()), Matches())
        try:
            await chat.create_session("tools", SID, HistoryMode.SERVER)
            await run(chat, turn("t1", Submit("weather?")))
            before = await store.load_with_messages(SID)
            with pytest.raises(ServiceError) as refused:
                await run(chat, turn("t2", operation))
            assert refused.value.reason == reason
            assert refused.value.metadata.get("field") == field
            assert CANARY not in refused.value.message
            assert await store.load_with_messages(SID) == before
        finally:
            await chat.close()

    asyncio.run(scenario())


def test_results_for_an_answer_that_asked_for_no_tools_are_a_failed_precondition() -> None:
    async def scenario() -> None:
        store = MemoryStore()
        chat = service(store, Scripted(final(), two_calls(), final()), Matches())
        try:
            await chat.create_session("tools", SID, HistoryMode.SERVER)
            results = ToolResults((ToolResult("call-a", "x"),))
            with pytest.raises(ServiceError) as none_yet:
                await run(chat, turn("t0", results))
            assert none_yet.value.reason == Reason.NO_PENDING_TOOL_CALLS
            await run(chat, turn("t1", Submit("hello")))
            await run(chat, turn("t2", Submit("weather?")))
            both = ToolResults((ToolResult("call-a", "x"), ToolResult("call-b", "y")))
            await run(chat, turn("t3", both))
            before = await store.load_with_messages(SID)
            with pytest.raises(ServiceError) as answered:  # already answered
                await run(chat, turn("t4", both))
            assert answered.value.reason == Reason.NO_PENDING_TOOL_CALLS
            assert await store.load_with_messages(SID) == before
        finally:
            await chat.close()

    asyncio.run(scenario())


def test_a_user_may_move_on_without_answering_the_calls() -> None:
    async def scenario() -> None:
        model = Scripted(two_calls(), final())
        chat = service(MemoryStore(), model, Matches())
        try:
            await chat.create_session("tools", SID, HistoryMode.SERVER)
            await run(chat, turn("t1", Submit("weather?")))
            moved = await run(chat, turn("t2", Submit("never mind")))
            assert isinstance(moved[-1], Completed)
            with pytest.raises(ServiceError) as late:
                await run(chat, turn("t3", ToolResults((ToolResult("call-a", "x"),))))
            assert late.value.reason == Reason.NO_PENDING_TOOL_CALLS
        finally:
            await chat.close()

    asyncio.run(scenario())


def test_more_calls_than_the_limit_fail_the_turn_and_commit_nothing() -> None:
    async def scenario() -> None:
        store = MemoryStore()
        limits = Limits(max_tool_calls=1)
        chat = service(store, Scripted(two_calls()), Matches(), limits)
        try:
            await chat.create_session("tools", SID, HistoryMode.SERVER)
            got = await run(chat, turn("t1", Submit("weather?")))
            failed = got[-1]
            assert isinstance(failed, Failed)
            assert failed.code == "tool_limit"
            assert await store.list_messages(SID) == ()
        finally:
            await chat.close()

    asyncio.run(scenario())


def test_long_arguments_fail_the_turn_with_tool_limit() -> None:
    async def scenario() -> None:
        limits = Limits(max_tool_arguments_bytes=8)
        chat = service(MemoryStore(), Scripted(two_calls()), Matches(), limits)
        try:
            await chat.create_session("tools", SID, HistoryMode.SERVER)
            got = await run(chat, turn("t1", Submit("weather?")))
            assert isinstance(got[-1], Failed)
            assert got[-1].code == "tool_limit"
        finally:
            await chat.close()

    asyncio.run(scenario())


def client_history(*tail: Message) -> tuple[Message, ...]:
    return (Message("u1", Role.USER, "weather?"), *tail)


def test_a_client_held_round_stores_no_tool_content(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await open_sqlite_store(tmp_path / "store.db")
        model, matcher = Scripted(two_calls(), final(), final()), Matches()
        chat = service(store, model, matcher)
        try:
            await chat.create_session("tools", SID, HistoryMode.CLIENT)
            first = await run(chat, turn("t1", Dispatch(client_history())))
            done = first[-1]
            assert isinstance(done, Completed)
            answer = Message(done.assistant_message_id, Role.ASSISTANT, "", done.tool_calls)
            results = (
                Message("r1", Role.TOOL, f"sun {CANARY}", tool_call_id="call-a"),
                Message("r2", Role.TOOL, "rain", tool_call_id="call-b"),
            )
            second = await run(chat, turn("t2", Dispatch(client_history(answer, *results))))
            assert isinstance(second[-1], Completed)
            assert matcher.inputs == 1
            assert model.requests[1].messages[-2:] == results
            # The client keeps the history: the same one sent again is answered again, as a
            # dispatch ending with a user message is.
            again = await run(chat, turn("t3", Dispatch(client_history(answer, *results))))
            assert isinstance(again[-1], Completed)
            assert model.requests[2].messages[-2:] == results
            unanswered = Message("a9", Role.ASSISTANT, "", (ToolCall("c9", "weather", "{}"),))
            with pytest.raises(ServiceError) as missing:  # an answer it never saw: all of its calls
                await run(chat, turn("t4", Dispatch(client_history(unanswered, results[0]))))
            assert missing.value.reason == Reason.TOOL_CALL_UNKNOWN
        finally:
            await chat.close()
        data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
        assert CANARY.encode() not in data

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("tail", "field"),
    [
        (
            (Message("a1", Role.ASSISTANT, "", (ToolCall("c1", "weather", "{not json"),)),),
            "dispatch.messages[1].tool_calls[0].arguments",
        ),
        (
            (Message("a1", Role.ASSISTANT, "", (ToolCall("c1", "weather", "[1]"),)),),
            "dispatch.messages[1].tool_calls[0].arguments",
        ),
        ((Message("t1", Role.TOOL, "x"),), "dispatch.messages[1].tool_call_id"),
        (
            (Message("a1", Role.USER, "x", (ToolCall("c1", "weather", "{}"),)),),
            "dispatch.messages[1].tool_calls",
        ),
    ],
    ids=["not-json", "not-an-object", "tool-without-call", "calls-on-a-user-message"],
)
def test_malformed_tool_data_in_a_dispatch_is_invalid(
    tail: tuple[Message, ...], field: str
) -> None:
    async def scenario() -> None:
        store = MemoryStore()
        chat = service(store, Scripted(), Matches())
        try:
            await chat.create_session("tools", SID, HistoryMode.CLIENT)
            before = await store.load(SID)
            with pytest.raises(ServiceError) as refused:
                await run(chat, turn("t1", Dispatch(client_history(*tail))))
            assert refused.value.reason == Reason.INVALID_ARGUMENT
            assert refused.value.metadata["field"] == field
            assert await store.load(SID) == before
        finally:
            await chat.close()

    asyncio.run(scenario())
