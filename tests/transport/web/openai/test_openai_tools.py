"""Tools through the OpenAI front, driven by the official `openai` SDK (its async client,
in the server's own loop): declared tools reach the model, its calls come back as OpenAI's
`tool_calls` (whole and streamed), and a second request carrying `role: tool` messages
continues the answer, in a conversation, statelessly and in a server-held session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.transport.conftest import CANARY, run
from tests.transport.web.conftest import WebLive, web_live

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    },
    {"type": "function", "function": {"name": "clock"}},
]
ASK: list[Any] = [{"role": "user", "content": "/tools"}]


def sdk(web: WebLive) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=web.url + "/v1", api_key="unused", max_retries=0)


def answered(message: Any) -> list[Any]:
    """The history after `message` (an SDK assistant message with tool calls) with a
    result for each of its calls."""
    calls = [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.function.name, "arguments": c.function.arguments},
        }
        for c in message.tool_calls
    ]
    return [
        *ASK,
        {"role": "assistant", "content": message.content, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": c["id"], "content": CANARY} for c in calls),
    ]


def test_a_tool_round_in_a_conversation(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web, sdk(web) as client:
            headers = {"X-AgentsKit-Conversation": "c-tools"}
            first = await client.chat.completions.create(
                model="probe", messages=ASK, tools=TOOLS, tool_choice="auto", extra_headers=headers
            )
            choice = first.choices[0]
            assert choice.finish_reason == "tool_calls"
            assert choice.message.content is None
            calls: list[Any] = list(choice.message.tool_calls or [])
            assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
                ("call-0", "weather", {"n": 0}),
                ("call-1", "clock", {"n": 1}),
            ]
            second = await client.chat.completions.create(
                model="probe", messages=answered(choice.message), tools=TOOLS, extra_headers=headers
            )
            assert second.choices[0].message.content == "2 tool results"
            assert second.choices[0].finish_reason == "stop"
            assert web.env.probe.route_calls == []
        data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
        assert CANARY.encode() not in data  # a conversation keeps no tool content

    run(scenario())


def test_streamed_tool_calls_arrive_as_tool_call_deltas(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web, sdk(web) as client:
            stream = await client.chat.completions.create(
                model="probe", messages=ASK, tools=TOOLS, stream=True
            )
            opened: dict[int, tuple[str, str]] = {}
            arguments: dict[int, str] = {}
            finish = None
            async for chunk in stream:
                for choice in chunk.choices:
                    for delta in choice.delta.tool_calls or []:
                        if delta.id is not None:
                            assert delta.function is not None
                            opened[delta.index] = (delta.id, str(delta.function.name))
                        if delta.function is not None and delta.function.arguments:
                            arguments[delta.index] = (
                                arguments.get(delta.index, "") + delta.function.arguments
                            )
                    finish = choice.finish_reason or finish
            assert opened == {0: ("call-0", "weather"), 1: ("call-1", "clock")}
            assert arguments == {0: '{"n":0}', 1: '{"n":1}'}
            assert finish == "tool_calls"

    run(scenario())


def test_a_stateless_round_and_a_server_held_session(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web, sdk(web) as client:
            first = await client.chat.completions.create(model="probe", messages=ASK, tools=TOOLS)
            again = await client.chat.completions.create(
                model="probe", messages=answered(first.choices[0].message), tools=TOOLS
            )
            assert again.choices[0].message.content == "2 tool results"

            sid = (await web.env.client.create_session("probe")).session_id
            headers = {"X-AgentsKit-Session": sid}
            held = await client.chat.completions.create(
                model="probe", messages=ASK, tools=TOOLS, extra_headers=headers
            )
            assert held.choices[0].finish_reason == "tool_calls"
            results = answered(held.choices[0].message)
            done = await client.chat.completions.create(
                model="probe", messages=results, tools=TOOLS, extra_headers=headers
            )
            assert done.choices[0].message.content == "2 tool results"
            history = await web.env.client.get_session(sid)
            assert [m.role for m in history.messages] == [
                "user",
                "assistant",
                "tool",
                "tool",
                "assistant",
            ]
            before = web.env.dump()
            with pytest.raises(openai.ConflictError) as refused:  # nothing is pending now
                await client.chat.completions.create(
                    model="probe", messages=results, tools=TOOLS, extra_headers=headers
                )
            assert CANARY not in str(refused.value)
            assert web.env.dump() == before

    run(scenario())


def test_a_session_of_another_definition_is_a_409_naming_model(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            sid = (await web.env.client.create_session("probe")).session_id
            before = web.env.dump()
            answer = await web.http.post(
                "/v1/chat/completions",
                json={"model": "support", "messages": [{"role": "user", "content": CANARY}]},
                headers={"X-AgentsKit-Session": sid},
            )
            assert answer.status_code == 409
            assert answer.json()["error"]["param"] == "model"
            assert CANARY not in answer.text
            assert web.env.dump() == before
            assert web.env.probe.model_calls == []

    run(scenario())


def test_bad_tool_messages_are_refused_naming_the_parameter(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            bad = [
                *ASK,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "weather", "arguments": CANARY},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
            ]
            answer: httpx.Response = await web.http.post(
                "/v1/chat/completions", json={"model": "probe", "messages": bad, "tools": TOOLS}
            )
            assert answer.status_code == 400
            assert answer.json()["error"]["param"].startswith("messages[1].tool_calls[0]")
            assert CANARY not in answer.text

    run(scenario())


def test_a_result_for_a_call_awaiting_approval_is_refused_in_the_request_s_own_names(
    tmp_path: Path,
) -> None:
    """OpenAI's protocol has no approval: a stateless result for a call of a tool the
    definition marks for approval is refused, naming the request's message, not the
    service's operation."""

    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": "clock", "arguments": "{}"},
            }
            history = [
                *ASK,
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": CANARY},
            ]
            answer: httpx.Response = await web.http.post(
                "/v1/chat/completions",
                json={"model": "probe-approve", "messages": history, "tools": TOOLS},
            )
            assert answer.status_code == 400
            error = answer.json()["error"]
            assert (error["param"], error["code"]) == (
                "messages[2].tool_call_id",
                "tool_call_unknown",
            )
            assert error["message"].startswith("messages[2].tool_call_id ")
            assert "dispatch" not in error["message"]
            assert CANARY not in answer.text
            assert web.env.probe.model_calls == []

    run(scenario())
