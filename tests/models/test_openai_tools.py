"""The `openai` adapter's tools against the fake model server over real HTTP: declarations
and tool history in the request, streamed tool calls as chunks, malformed tool deltas."""

from __future__ import annotations

import asyncio
import json
from contextlib import aclosing
from typing import Any

import pytest

from agentskit_chat.conversation import Message, Role, ToolCall
from agentskit_chat.fakemodel import Call, FakeModelServer, HttpResponse, Reply, ToolCalls
from agentskit_chat.models import (
    NO_TOOLS,
    FinishChunk,
    ModelChunk,
    ModelError,
    ModelRequest,
    OpenAIAdapter,
    ResponseChunk,
    TextChunk,
    ToolCallDeltaChunk,
    ToolCallStartChunk,
    ToolOptions,
    ToolSpec,
    UsageChunk,
)
from agentskit_chat.models._openai_protocol import request_body
from agentskit_chat.models._openai_settings import parse_settings

CANARY = "canary-7f3a-arguments"
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
WEATHER = ToolSpec("get_weather", "The weather in a city", WEATHER_SCHEMA)
CLOCK = ToolSpec("clock")
TOOLS = ToolOptions((WEATHER, CLOCK), "auto", True)
ASKED = (Message("u1", Role.USER, "Weather in Paris, and the time?"),)


def settings(server: FakeModelServer, **extra: Any) -> dict[str, Any]:
    return {"adapter": "openai", "base_url": server.url, "model": "test-model", **extra}


def call(
    server: FakeModelServer,
    tools: ToolOptions = TOOLS,
    messages: tuple[Message, ...] = ASKED,
    **extra: Any,
) -> tuple[list[ModelChunk], ModelError | None]:
    """The chunks received, then the error that ended the stream (None when it finished)."""
    model = settings(server, **extra)

    async def run() -> tuple[list[ModelChunk], ModelError | None]:
        adapter = OpenAIAdapter(model, retry_delay=0.01)
        received: list[ModelChunk] = []
        request = ModelRequest("chat", "s1", messages, model, tools=tools)
        try:
            async with aclosing(adapter.stream(request)) as chunks:
                async for chunk in chunks:
                    received.append(chunk)
        except ModelError as exc:
            return received, exc
        finally:
            await adapter.close()
        return received, None

    return asyncio.run(run())


def test_declared_tools_reach_the_request_in_the_openai_shape(server: FakeModelServer) -> None:
    chunks, error = call(server, ToolOptions((WEATHER, CLOCK), "required", False))
    assert error is None
    assert chunks[-2:] == [FinishChunk("stop"), UsageChunk(6, 4)]  # the default reply
    (received,) = server.requests
    assert received.body == {
        "model": "test-model",
        "messages": [{"role": "user", "content": "Weather in Paris, and the time?"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "The weather in a city",
                    "parameters": WEATHER_SCHEMA,
                },
            },
            {
                "type": "function",
                "function": {"name": "clock", "parameters": {"type": "object", "properties": {}}},
            },
        ],
        "tool_choice": "required",
        "parallel_tool_calls": False,
    }
    assert received.tools == received.body["tools"]
    assert received.tool_choice == "required"


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        pytest.param("auto", "auto", id="auto"),
        pytest.param("none", "none", id="none"),
        pytest.param("required", "required", id="required"),
        pytest.param(
            "get_weather", {"type": "function", "function": {"name": "get_weather"}}, id="named"
        ),
        pytest.param(None, None, id="unset"),
        pytest.param("", None, id="empty"),
    ],
)
def test_the_tool_choice_is_passed_through_or_names_the_function(
    server: FakeModelServer, choice: str | None, sent: object
) -> None:
    _, error = call(server, ToolOptions((WEATHER,), choice))
    assert error is None
    body = server.requests[0].body
    assert body.get("tool_choice") == sent
    assert ("tool_choice" in body) == (sent is not None)
    assert "parallel_tool_calls" not in body


@pytest.mark.parametrize("parallel", [True, False])
def test_parallel_tool_calls_is_sent_when_set(server: FakeModelServer, parallel: bool) -> None:
    call(server, ToolOptions((WEATHER,), parallel=parallel))
    assert server.requests[0].body["parallel_tool_calls"] is parallel


def test_tool_history_maps_to_tool_calls_and_tool_messages(server: FakeModelServer) -> None:
    history = (
        *ASKED,
        Message(
            "a1",
            Role.ASSISTANT,
            "",
            (
                ToolCall("call_w", "get_weather", '{"city": "Paris"}'),
                ToolCall("call_c", "clock", ""),
            ),
        ),
        Message("t1", Role.TOOL, "sunny, 21 C", tool_call_id="call_w"),
        Message("t2", Role.TOOL, "9:00", tool_call_id="call_c"),
        Message("a2", Role.ASSISTANT, "Sunny; it is nine."),
        Message("u2", Role.USER, "And Rome?"),
        Message("a3", Role.ASSISTANT, "Let me look.", (ToolCall("call_r", "get_weather", "{}"),)),
        Message("t3", Role.TOOL, "rain", tool_call_id="call_r"),
    )
    _, error = call(server, messages=history, system_prompt="Be brief.")
    assert error is None
    assert server.requests[0].body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris, and the time?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_w",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                # Arguments not known (empty) go as an empty object.
                {
                    "id": "call_c",
                    "type": "function",
                    "function": {"name": "clock", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_w", "content": "sunny, 21 C"},
        {"role": "tool", "tool_call_id": "call_c", "content": "9:00"},
        {"role": "assistant", "content": "Sunny; it is nine."},
        {"role": "user", "content": "And Rome?"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_r",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_r", "content": "rain"},
    ]


def test_unanswered_calls_and_results_without_their_call_are_left_out(
    server: FakeModelServer,
) -> None:
    history = (
        Message("t0", Role.TOOL, "orphan", tool_call_id="call_gone"),
        Message("u1", Role.USER, "Weather?"),
        Message("a1", Role.ASSISTANT, "", (ToolCall("call_1", "get_weather", "{}"),)),
        Message("u2", Role.USER, "Never mind; the time?"),  # the user moved on
        Message(
            "a2",
            Role.ASSISTANT,
            "Looking.",
            (ToolCall("call_2", "clock", "{}"), ToolCall("call_3", "get_weather", "{}")),
        ),
        Message("t2", Role.TOOL, "9:00", tool_call_id="call_2"),
        Message("t2b", Role.TOOL, "again", tool_call_id="call_2"),  # answered already
        Message("u3", Role.USER, "Thanks"),
    )
    _, error = call(server, messages=history)
    assert error is None
    assert server.requests[0].body["messages"] == [
        {"role": "user", "content": "Weather?"},
        {"role": "user", "content": "Never mind; the time?"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "clock", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": "9:00"},
        {"role": "user", "content": "Thanks"},
    ]


def test_without_declared_tools_the_body_is_unchanged(server: FakeModelServer) -> None:
    history = (
        Message("u1", Role.USER, "Hello"),
        Message("a1", Role.ASSISTANT, "Hi, how can I help?"),
        Message("u2", Role.USER, "Tell me about streams"),
    )
    model = settings(server, temperature=0.3, max_tokens=42, system_prompt="Be brief.")
    expected = (
        b'{"model":"test-model","messages":[{"role":"system","content":"Be brief."},'
        b'{"role":"user","content":"Hello"},{"role":"assistant","content":"Hi, how can I help?"},'
        b'{"role":"user","content":"Tell me about streams"}],"stream":true,'
        b'"stream_options":{"include_usage":true},"temperature":0.3,"max_tokens":42}'
    )
    parsed = parse_settings(model)
    assert request_body(parsed, history) == expected
    # A choice or a parallel flag without tools declares nothing.
    assert request_body(parsed, history, tools=ToolOptions((), "required", True)) == expected
    assert request_body(parsed, history, tools=NO_TOOLS) == expected
    _, error = call(server, ToolOptions((), "auto", False), history, **model)
    assert error is None
    assert server.requests[0].body == json.loads(expected)


def test_interleaved_tool_calls_stream_as_start_and_delta_chunks(server: FakeModelServer) -> None:
    server.enqueue(
        ToolCalls(
            (
                Call("get_weather", '{"city": "Paris", "units": "metric"}', id="call_w"),
                Call("clock", '{"zone": "CET"}', id="call_c"),
            ),
            pieces=3,
            text=("Let me ", "check."),
            usage=(9, 8),
        )
    )
    chunks, error = call(server)
    assert error is None
    assert isinstance(chunks[0], ResponseChunk)
    assert chunks[1:] == [
        TextChunk("Let me "),
        TextChunk("check."),
        ToolCallStartChunk(0, "call_w", "get_weather"),
        ToolCallStartChunk(1, "call_c", "clock"),
        ToolCallDeltaChunk("call_w", '{"city": '),
        ToolCallDeltaChunk("call_c", '{"zon'),
        ToolCallDeltaChunk("call_w", '"Paris", '),
        ToolCallDeltaChunk("call_c", 'e": "'),
        ToolCallDeltaChunk("call_w", '"units": "metric"}'),
        ToolCallDeltaChunk("call_c", 'CET"}'),
        FinishChunk("tool_calls"),
        UsageChunk(9, 8),
    ]
    arguments = {
        call_id: "".join(
            c.arguments
            for c in chunks
            if isinstance(c, ToolCallDeltaChunk) and c.call_id == call_id
        )
        for call_id in ("call_w", "call_c")
    }
    assert {k: json.loads(v) for k, v in arguments.items()} == {
        "call_w": {"city": "Paris", "units": "metric"},
        "call_c": {"zone": "CET"},
    }


def event(*items: dict[str, Any], finish: str | None = None) -> str:
    delta = {"tool_calls": list(items)} if items else {}
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return f"data: {json.dumps({'id': 'c1', 'model': 'm', 'choices': [choice]})}\n\n"


def stream_of(*events: str) -> HttpResponse:
    return HttpResponse(200, "".join(events) + "data: [DONE]\n\n", "text/event-stream")


def test_calls_in_one_delta_with_arguments_and_repeated_ids_are_read(
    server: FakeModelServer,
) -> None:
    # Some servers send a whole call in its first delta, several calls in one delta, or
    # repeat the id and name in every delta of a call: all of it is the same calls.
    name = {"name": "get_weather"}
    server.enqueue(
        stream_of(
            event(
                {
                    "index": 0,
                    "id": "a",
                    "type": "function",
                    "function": {**name, "arguments": "{}"},
                },
                {"index": 1, "id": "b", "function": {**name, "arguments": '{"city":'}},
            ),
            event({"index": 1, "id": "b", "function": {**name, "arguments": ' "Oslo"}'}}),
            event({"index": 1, "function": {"arguments": ""}}, finish="tool_calls"),
        )
    )
    chunks, error = call(server)
    assert error is None
    assert chunks == [
        ResponseChunk("c1", "m"),
        ToolCallStartChunk(0, "a", "get_weather"),
        ToolCallDeltaChunk("a", "{}"),
        ToolCallStartChunk(1, "b", "get_weather"),
        ToolCallDeltaChunk("b", '{"city":'),
        ToolCallDeltaChunk("b", ' "Oslo"}'),
        FinishChunk("tool_calls"),
    ]


FIRST = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather"}}
PIECE = {"index": 0, "function": {"arguments": f'{{"secret": "{CANARY}"}}'}}
MALFORMED = [
    pytest.param([{"index": 0, "function": {"name": "get_weather"}}], id="first-without-id"),
    pytest.param([{"index": 0, "id": "call_1", "function": {}}], id="first-without-name"),
    pytest.param([{"index": 0, "id": "", "function": {"name": "f"}}], id="first-with-empty-id"),
    pytest.param([PIECE], id="arguments-before-the-call-started"),
    pytest.param([{**FIRST, "index": "0"}, PIECE], id="string-index"),
    pytest.param([{**FIRST, "index": 0.5}], id="float-index"),
    pytest.param([{**FIRST, "index": True}], id="bool-index"),
    pytest.param([{**FIRST, "index": -1}], id="negative-index"),
    pytest.param([{k: v for k, v in FIRST.items() if k != "index"}], id="no-index"),
    pytest.param(["call"], id="item-not-an-object"),
    pytest.param([{**FIRST, "function": "get_weather"}], id="function-not-an-object"),
    pytest.param([{**FIRST, "id": 7}], id="id-not-text"),
    pytest.param(
        [FIRST, {"index": 0, "function": {"arguments": {"secret": CANARY}}}],
        id="arguments-not-text",
    ),
    pytest.param(
        [FIRST, {"index": 0, "id": "call_2", "function": {"arguments": CANARY}}],
        id="changed-id",
    ),
    pytest.param(
        [FIRST, {"index": 0, "function": {"name": "clock", "arguments": CANARY}}],
        id="changed-name",
    ),
    pytest.param([FIRST, PIECE, {**FIRST, "index": 1}], id="one-id-for-two-calls"),
]


@pytest.mark.parametrize("items", MALFORMED)
def test_a_malformed_tool_delta_is_a_protocol_error_without_its_arguments(
    server: FakeModelServer, items: list[Any]
) -> None:
    server.enqueue(stream_of(*(event(item) for item in items), event(finish="tool_calls")))
    chunks, error = call(server)
    assert error is not None
    assert (error.code, error.retryable) == ("model_protocol_error", False)
    assert error.message.startswith("the model ")
    shown = " ".join([str(error), repr(error), error.message, *map(str, error.args)])
    assert CANARY not in shown
    assert "get_weather" not in shown
    assert error.__cause__ is None
    assert not any(isinstance(c, FinishChunk) for c in chunks)
    assert len(server.requests) == 1  # Chunks had reached the caller, or it is not retryable.


def test_tool_calls_that_are_not_a_list_are_a_protocol_error(server: FakeModelServer) -> None:
    data = {"choices": [{"index": 0, "delta": {"tool_calls": FIRST}, "finish_reason": None}]}
    server.enqueue(stream_of(f"data: {json.dumps(data)}\n\n"))
    chunks, error = call(server)
    assert chunks == []
    assert error is not None
    assert (error.code, error.retryable) == ("model_protocol_error", False)


def test_a_tool_round_with_the_fake_model(server: FakeModelServer) -> None:
    server.model.answers["Weather in Paris, and the time?"] = ToolCalls()
    first, error = call(server)
    assert error is None
    started = [c for c in first if isinstance(c, ToolCallStartChunk)]
    assert [(c.index, c.name) for c in started] == [(0, "get_weather"), (1, "clock")]
    arguments = {
        s.call_id: "".join(
            c.arguments
            for c in first
            if isinstance(c, ToolCallDeltaChunk) and c.call_id == s.call_id
        )
        for s in started
    }
    assert [json.loads(arguments[s.call_id]) for s in started] == [{"city": "example"}, {}]
    assert FinishChunk("tool_calls") in first
    made = tuple(ToolCall(s.call_id, s.name, arguments[s.call_id]) for s in started)
    history = (
        *ASKED,
        Message("a1", Role.ASSISTANT, "", made),
        *(Message(f"t{i}", Role.TOOL, "ok", tool_call_id=c.id) for i, c in enumerate(made)),
    )
    second, error = call(server, messages=history)
    assert error is None
    ids = ", ".join(c.id for c in made)
    text = "".join(c.text for c in second if isinstance(c, TextChunk))
    assert text == f"The fake model got 2 tool results ({ids})."
    assert FinishChunk("stop") in second
    assert [m["role"] for m in server.requests[1].body["messages"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
    ]


def test_a_reply_without_tools_still_streams_text(server: FakeModelServer) -> None:
    server.enqueue(Reply(chunks=("plain",)))
    chunks, error = call(server)
    assert error is None
    assert [c for c in chunks if isinstance(c, TextChunk)] == [TextChunk("plain")]
