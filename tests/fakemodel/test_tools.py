"""Scripted tool calls of the fake model over real HTTP: the OpenAI stream shape, which
request gets them, the answer to tool results, and the record of declared tools."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from typing import Any

import httpx
import pytest

from agentskit_chat.fakemodel import (
    DEFAULT_TEXT,
    Call,
    Ending,
    FakeModelServer,
    Reply,
    ToolCalls,
)
from agentskit_chat.fakemodel._tools import example_arguments, example_value

from .test_cli import LISTENING, REPO, base_env, command
from .test_server import chunks, content, events

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "units": {"type": "string", "enum": ["metric", "imperial"]},
                "days": {"type": "integer"},
            },
        },
    },
}
CLOCK = {"type": "function", "function": {"name": "clock"}}


def body(question: str = "Weather?", **extra: Any) -> dict[str, Any]:
    return {
        "model": "fake-model",
        "messages": [{"role": "user", "content": question}],
        "stream": True,
        "stream_options": {"include_usage": True},
        **extra,
    }


def post(server: FakeModelServer, sent: dict[str, Any]) -> list[dict[str, Any]]:
    response = httpx.post(f"{server.url}/chat/completions", json=sent)
    assert response.status_code == 200
    data = events(response.text)
    assert data[-1] == "[DONE]"
    return chunks(data)


def tool_items(decoded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every `tool_calls` item of the stream, in order."""
    return [
        item
        for c in decoded
        if c["choices"]
        for item in c["choices"][0]["delta"].get("tool_calls") or []
    ]


def calls_of(decoded: list[dict[str, Any]]) -> dict[int, tuple[str, str, str]]:
    """index -> (id, name, arguments) of the streamed calls, as a client assembles them."""
    made: dict[int, list[str]] = {}
    for item in tool_items(decoded):
        call = made.setdefault(item["index"], ["", "", ""])
        call[0] = item.get("id", call[0])
        call[1] = item.get("function", {}).get("name", call[1])
        call[2] += item.get("function", {}).get("arguments", "")
    return {index: (c[0], c[1], c[2]) for index, c in made.items()}


def finish(decoded: list[dict[str, Any]]) -> str | None:
    reasons = [c["choices"][0]["finish_reason"] for c in decoded if c["choices"]]
    return next((r for r in reasons if r is not None), None)


TWO_CALLS = ToolCalls(
    (
        Call("get_weather", '{"city": "Paris", "units": "metric"}', id="call_w"),
        Call("clock", '{"zone": "CET"}', id="call_c"),
    ),
    pieces=3,
    text=("Checking.",),
    usage=(5, 9),
)


def test_tool_calls_stream_in_the_openai_shape_with_interleaved_indexes(
    server: FakeModelServer,
) -> None:
    server.enqueue(TWO_CALLS)
    decoded = post(server, body(tools=[WEATHER, CLOCK]))
    assert decoded[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert content(decoded) == "Checking."
    items = tool_items(decoded)
    assert items[:2] == [
        {
            "index": 0,
            "id": "call_w",
            "type": "function",
            "function": {"name": "get_weather", "arguments": ""},
        },
        {
            "index": 1,
            "id": "call_c",
            "type": "function",
            "function": {"name": "clock", "arguments": ""},
        },
    ]
    assert [i["index"] for i in items[2:]] == [0, 1, 0, 1, 0, 1]
    assert all(set(i) == {"index", "function"} for i in items[2:])  # no id, no name again
    assert all(
        len(c["choices"][0]["delta"].get("tool_calls") or []) <= 1 for c in decoded if c["choices"]
    )
    assert calls_of(decoded) == {
        0: ("call_w", "get_weather", '{"city": "Paris", "units": "metric"}'),
        1: ("call_c", "clock", '{"zone": "CET"}'),
    }
    assert finish(decoded) == "tool_calls"
    assert decoded[-1]["usage"] == {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}
    assert server.requests[0].chunks_sent == 9  # one text delta and eight tool deltas


def test_without_interleave_the_calls_come_one_after_another(server: FakeModelServer) -> None:
    server.enqueue(ToolCalls((Call("a", '{"x": 1, "y": 2}'), Call("b", "{}")), interleave=False))
    decoded = post(server, body(tools=[CLOCK]))
    assert [i["index"] for i in tool_items(decoded)] == [0, 0, 0, 0, 1, 1, 1]
    made = calls_of(decoded)
    assert [(name, arguments) for _, name, arguments in made.values()] == [
        ("a", '{"x": 1, "y": 2}'),
        ("b", "{}"),
    ]
    first, second = (call_id for call_id, _, _ in made.values())
    assert re.fullmatch(r"call_fake_\d+", first)
    assert re.fullmatch(r"call_fake_\d+", second)
    assert first != second
    assert decoded[-1]["usage"]["completion_tokens"] == 7


def test_with_no_calls_scripted_the_declared_tools_are_called(server: FakeModelServer) -> None:
    server.model.answers["Weather?"] = ToolCalls()
    made = calls_of(post(server, body(tools=[WEATHER, CLOCK])))
    assert [(name, json.loads(arguments)) for _, name, arguments in made.values()] == [
        ("get_weather", {"city": "example", "units": "metric", "days": 1}),
        ("clock", {}),
    ]
    named = {"type": "function", "function": {"name": "clock"}}
    made = calls_of(post(server, body(tools=[WEATHER, CLOCK], tool_choice=named)))
    assert [name for _, name, _ in made.values()] == ["clock"]
    made = calls_of(post(server, body(tools=[WEATHER, CLOCK], parallel_tool_calls=False)))
    assert [name for _, name, _ in made.values()] == ["get_weather"]


def test_a_keyed_tool_answer_needs_a_request_that_offers_tools(server: FakeModelServer) -> None:
    server.model.answers["Weather?"] = TWO_CALLS
    server.enqueue(Reply(chunks=("queued",)))
    plain = post(server, body())  # no tools declared: the key does not count
    assert (content(plain), tool_items(plain)) == ("queued", [])
    refused = post(server, body(tools=[WEATHER], tool_choice="none"))
    assert (content(refused), tool_items(refused)) == (DEFAULT_TEXT, [])
    offered = post(server, body(tools=[WEATHER], tool_choice="required"))
    assert len(calls_of(offered)) == 2
    assert finish(offered) == "tool_calls"


def test_the_tool_reply_answers_requests_that_offer_tools() -> None:
    with FakeModelServer(tool_reply=ToolCalls(pieces=1)) as server:
        offered = post(server, body(tools=[CLOCK]))
        assert [(name, arguments) for _, name, arguments in calls_of(offered).values()] == [
            ("clock", "{}")
        ]
        assert content(post(server, body())) == DEFAULT_TEXT


def results_body(*ids: str) -> dict[str, Any]:
    calls = [
        {"id": i, "type": "function", "function": {"name": "clock", "arguments": "{}"}} for i in ids
    ]
    return body(
        tools=[CLOCK],
        messages=[
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            *({"role": "tool", "tool_call_id": i, "content": "ok"} for i in ids),
        ],
    )


def test_tool_results_get_a_sentence_naming_how_many(server: FakeModelServer) -> None:
    server.model.answers["Weather?"] = TWO_CALLS  # the last user message still has this key
    two = post(server, results_body("call_a", "call_b"))
    assert content(two) == "The fake model got 2 tool results (call_a, call_b)."
    assert finish(two) == "stop"
    assert tool_items(two) == []
    assert content(post(server, results_body("call_a"))) == (
        "The fake model got 1 tool result (call_a)."
    )


def test_tool_results_take_a_queued_script_then_the_after_tools_answer() -> None:
    with FakeModelServer(after_tools=Reply(chunks=("All ", "done."))) as server:
        server.enqueue(Reply(chunks=("queued",)))
        assert content(post(server, results_body("call_a"))) == "queued"
        assert content(post(server, results_body("call_a"))) == "All done."


def test_declared_tools_and_the_choice_are_recorded(server: FakeModelServer) -> None:
    post(server, body(tools=[WEATHER, CLOCK], tool_choice="auto"))
    post(server, body())
    with_tools, without = server.requests
    assert with_tools.tools == [WEATHER, CLOCK]
    assert with_tools.tool_choice == "auto"
    assert (without.tools, without.tool_choice) == (None, None)


def test_a_request_without_stream_gets_the_calls_in_one_message(server: FakeModelServer) -> None:
    server.enqueue(TWO_CALLS)
    sent = {k: v for k, v in body(tools=[WEATHER]).items() if k != "stream"}
    answer = httpx.post(f"{server.url}/chat/completions", json=sent).json()
    (choice,) = answer["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {
                "id": "call_w",
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "arguments": '{"city": "Paris", "units": "metric"}',
                },
            },
            {
                "id": "call_c",
                "type": "function",
                "function": {"name": "clock", "arguments": '{"zone": "CET"}'},
            },
        ],
    }


def test_a_tool_stream_can_pause_and_break_like_a_reply(server: FakeModelServer) -> None:
    server.enqueue(ToolCalls((Call("clock"),), ending=Ending.TRUNCATE))
    data = events(httpx.post(f"{server.url}/chat/completions", json=body(tools=[CLOCK])).text)
    assert "[DONE]" not in data
    assert finish(chunks(data)) is None
    server.enqueue(ToolCalls((Call("clock"),), pause_after=0))
    with (
        httpx.Client() as client,
        client.stream("POST", f"{server.url}/chat/completions", json=body()) as response,
    ):
        parts = response.iter_bytes()
        assert b'"role": "assistant"' in next(parts)
        assert server.requests[-1].chunks_sent == 0
        server.resume()
        rest = b"".join(parts).decode()
    assert calls_of(chunks(events(rest)))[0][1:] == ("clock", "{}")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ToolCalls(pieces=0), "at least one piece"),
        (lambda: ToolCalls((Call(""),)), "needs a name"),
    ],
)
def test_impossible_tool_scripts_are_refused(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    ("schema", "example"),
    [
        ({"type": "string"}, "example"),
        ({"type": "integer"}, 1),
        ({"type": "number"}, 1),
        ({"type": "boolean"}, True),
        ({"type": "array", "items": {"type": "string"}}, []),
        ({"type": ["null", "string"]}, "example"),
        ({"enum": ["a", "b"]}, "a"),
        ({"const": 3}, 3),
        (
            {"properties": {"inner": {"type": "object", "properties": {"n": {}}}}},
            {"inner": {"n": "example"}},
        ),
        ({}, "example"),
    ],
)
def test_example_values_fit_their_schema(schema: dict[str, Any], example: Any) -> None:
    assert example_value(schema) == example


def test_example_arguments_are_always_an_object() -> None:
    assert example_arguments(None) == "{}"
    assert example_arguments({"type": "string"}) == "{}"
    assert example_arguments({"type": "object", "properties": {"q": {"type": "string"}}}) == (
        '{"q": "example"}'
    )
    deep: dict[str, Any] = {"type": "object", "properties": {}}
    for _ in range(20):
        deep = {"type": "object", "properties": {"d": deep}}
    assert json.loads(example_arguments(deep))  # bounded, still an object


def test_the_command_calls_declared_tools_with_tool_calls() -> None:
    with subprocess.Popen(
        command("--listen", "127.0.0.1:0", "--tool-calls"),
        cwd=REPO,
        env=base_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            found = LISTENING.match(process.stdout.readline().strip())
            assert found is not None
            url = f"{found[1]}/chat/completions"
            called = httpx.post(url, json=body(tools=[WEATHER, CLOCK]), timeout=30)
            results = httpx.post(url, json=results_body("call_x"), timeout=30)
            plain = httpx.post(url, json=body(), timeout=30)
            process.send_signal(signal.SIGTERM)
            assert process.wait(30) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    made = calls_of(chunks(events(called.text)))
    assert [name for _, name, _ in made.values()] == ["get_weather", "clock"]
    assert content(chunks(events(results.text))) == "The fake model got 1 tool result (call_x)."
    assert content(chunks(events(plain.text))) == DEFAULT_TEXT


def test_a_tool_reply_limited_to_named_tools_calls_those_and_leaves_other_requests_be() -> None:
    with FakeModelServer(tool_reply=ToolCalls(only=("clock",))) as limited:
        both = post(limited, body(tools=[WEATHER, CLOCK]))
        assert [name for _, name, _ in calls_of(both).values()] == ["clock"]
        assert finish(both) == "tool_calls"
        other = post(limited, body(tools=[WEATHER]))
        assert calls_of(other) == {}
        assert content(other) == DEFAULT_TEXT


def test_the_command_line_calls_only_the_tools_it_names() -> None:
    with subprocess.Popen(
        command("--call-tool", "clock"),
        cwd=REPO,
        env=base_env(),
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            found = LISTENING.search(process.stdout.readline().strip())
            assert found is not None
            sent = body(tools=[WEATHER, CLOCK])
            response = httpx.post(f"{found.group(1)}/chat/completions", json=sent, timeout=30)
            decoded = chunks(events(response.text))
            assert [name for _, name, _ in calls_of(decoded).values()] == ["clock"]
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
    both = subprocess.run(
        command("--call-tool", "clock", "--tool-calls"),
        cwd=REPO,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert both.returncode == 2
    assert "use one" in both.stderr
