"""Tools over the `/ai-sdk/` front, on a live server with the probe model: a tool round's
chunks, the continuation that answers it (client-held and server-held chats), approvals,
and malformed tool parts refused before anything is stored."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentskit_chat_client import HistoryMode
from tests.transport.conftest import CANARY, run
from tests.transport.web.aisdk.chat import chunks, user
from tests.transport.web.conftest import web_live

TOOLS = [
    {
        "name": "weather",
        "description": "The weather in a city.",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
    },
    {"name": "clock", "parameters": {"type": "object"}},
]


def types(found: list[Any]) -> list[str]:
    return [c if c == "[DONE]" else c["type"] for c in found]


def of(found: list[Any], kind: str) -> list[dict[str, Any]]:
    return [c for c in found if c != "[DONE]" and c["type"] == kind]


async def ask(
    http: httpx.AsyncClient, chat_id: str, messages: list[Any], definition: str = "probe"
) -> httpx.Response:
    body = {"id": chat_id, "trigger": "submit-message", "messages": messages, "tools": TOOLS}
    return await http.post(f"/ai-sdk/{definition}", json=body)


def tool(name: str, call_id: str, state: str, **fields: Any) -> dict[str, Any]:
    return {"type": f"tool-{name}", "toolCallId": call_id, "state": state, **fields}


def answered(message_id: str, *parts: dict[str, Any]) -> dict[str, Any]:
    """The assistant UIMessage of a tool round as useChat holds it, with `parts` in its step."""
    return {"id": message_id, "role": "assistant", "parts": [{"type": "step-start"}, *parts]}


def outputs() -> list[dict[str, Any]]:
    return [
        tool("weather", "call-0", "output-available", input={"n": 0}, output={"t": CANARY}),
        tool("clock", "call-1", "output-available", input={"n": 1}, output="9:00"),
    ]


def test_a_tool_round_and_its_continuation_in_a_client_held_chat(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            first = chunks((await ask(web.http, "c-tools", [user("u1", "/tools")])).text)
            assert types(first) == [
                "start",
                "data-agentskit-snapshot",
                "data-agentskit-decision",
                "start-step",
                "tool-input-start",
                "tool-input-start",
                "tool-input-delta",
                "tool-input-delta",
                "tool-input-delta",
                "tool-input-delta",
                "tool-input-available",
                "tool-input-available",
                "finish-step",
                "data-agentskit-snapshot",
                "finish",
                "[DONE]",
            ]
            starts = of(first, "tool-input-start")
            assert [(c["toolCallId"], c["toolName"]) for c in starts] == [
                ("call-0", "weather"),
                ("call-1", "clock"),
            ]
            deltas = of(first, "tool-input-delta")
            assert "".join(c["inputTextDelta"] for c in deltas if c["toolCallId"] == "call-1") == (
                '{"n":1}'
            )
            available = of(first, "tool-input-available")
            assert [(c["toolCallId"], c["toolName"], c["input"]) for c in available] == [
                ("call-0", "weather", {"n": 0}),
                ("call-1", "clock", {"n": 1}),
            ]
            assert first[-2] == {"type": "finish", "finishReason": "tool-calls"}
            answer_id = first[0]["messageId"]
            # useChat's continuation: the history with the tool outputs, the same chat.
            history = [user("u1", "/tools"), answered(answer_id, *outputs())]
            second = chunks((await ask(web.http, "c-tools", history)).text)
            assert second[0]["messageId"] == answer_id  # the step joins the same message
            assert types(second) == [
                "start",
                "data-agentskit-snapshot",
                "data-agentskit-decision",
                "start-step",
                "text-start",
                "text-delta",
                "text-end",
                "finish-step",
                "data-agentskit-snapshot",
                "finish",
                "[DONE]",
            ]
            text = "".join(c["delta"] for c in of(second, "text-delta"))
            assert text == "2 tool results"
            assert second[-2]["finishReason"] == "stop"
            assert web.env.probe.model_calls == [1, 4]  # user, calls, and two tool messages
            # The next turn's history holds the whole answer: two steps, then a new message.
            later = [
                *history[:1],
                {
                    **history[1],
                    "parts": [
                        *history[1]["parts"],
                        {"type": "step-start"},
                        {"type": "text", "text": text},
                    ],
                },
                user("u2", "/tools"),
            ]
            third = chunks((await ask(web.http, "c-tools", later)).text)
            assert len(of(third, "tool-input-available")) == 2
            assert web.env.probe.model_calls[-1] == 6
            assert CANARY not in repr(web.env.dump())  # a client-held chat stores no content

    run(scenario())
    for record in caplog.records:
        assert CANARY not in record.getMessage()


def test_a_server_held_chat_sends_its_tool_outputs_as_tool_results(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            client = web.env.client
            await client.create_session(
                "probe", session_id="s-tools", history_mode=HistoryMode.SERVER
            )
            first = chunks((await ask(web.http, "s-tools", [user("u1", "/tools")])).text)
            answer_id = first[0]["messageId"]
            assert first[-2]["finishReason"] == "tool-calls"
            history = [user("u1", "/tools"), answered(answer_id, *outputs())]
            second = chunks((await ask(web.http, "s-tools", history)).text)
            assert second[0]["messageId"] == answer_id
            assert "".join(c["delta"] for c in of(second, "text-delta")) == "2 tool results"
            got = await client.get_session("s-tools")
            tools = [m for m in got.messages if m.tool_call_id]
            assert [(m.tool_call_id, json.loads(m.content)) for m in tools] == [
                ("call-0", {"t": CANARY}),
                ("call-1", "9:00"),
            ]

    run(scenario())


def test_an_approval_request_and_its_responses(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server-held chat approves (the call then runs at the client); a client-held one
    denies, with a reason."""
    caplog.set_level(logging.DEBUG)

    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            definition = "probe-approve"
            held = HistoryMode.SERVER
            await web.env.client.create_session(definition, session_id="a-1", history_mode=held)
            first = chunks((await ask(web.http, "a-1", [user("u1", "/tools")], definition)).text)
            assert of(first, "tool-approval-request") == [
                {
                    "type": "tool-approval-request",
                    "approvalId": "approval-call-1",
                    "toolCallId": "call-1",
                }
            ]
            assert types(first).index("tool-approval-request") == (
                types(first).index("tool-input-available") + 2
            )
            assert first[-2]["finishReason"] == "tool-calls"
            answer_id = first[0]["messageId"]
            weather = tool("weather", "call-0", "output-available", input={"n": 0}, output="sunny")
            approval = {"id": "approval-call-1", "approved": True}
            clock = tool("clock", "call-1", "approval-responded", input={"n": 1}, approval=approval)
            history = [user("u1", "/tools"), answered(answer_id, weather, clock)]
            # Approved without a result: the call goes back to the client to run.
            second = chunks((await ask(web.http, "a-1", history, definition)).text)
            assert of(second, "tool-input-available") == [
                {
                    "type": "tool-input-available",
                    "toolCallId": "call-1",
                    "toolName": "clock",
                    "input": {"n": 1},
                }
            ]
            assert not {"start-step", "tool-input-start", "tool-input-delta"} & set(types(second))
            assert second[-2]["finishReason"] == "tool-calls"
            ran = tool(
                "clock",
                "call-1",
                "output-available",
                input={"n": 1},
                output="9:00",
                approval=approval,
            )
            history = [user("u1", "/tools"), answered(answer_id, weather, ran)]
            third = chunks((await ask(web.http, "a-1", history, definition)).text)
            assert "".join(c["delta"] for c in of(third, "text-delta")) == "2 tool results"
            # Denied, with a reason: the model reads a denied result; the part is denied.
            first = chunks((await ask(web.http, "a-2", [user("u1", "/tools")], definition)).text)
            no = {"id": "approval-call-1", "approved": False, "reason": CANARY}
            clock = tool("clock", "call-1", "approval-responded", input={"n": 1}, approval=no)
            history = [user("u1", "/tools"), answered(first[0]["messageId"], weather, clock)]
            denied = chunks((await ask(web.http, "a-2", history, definition)).text)
            assert of(denied, "tool-output-denied") == [
                {"type": "tool-output-denied", "toolCallId": "call-1"}
            ]
            assert "".join(c["delta"] for c in of(denied, "text-delta")) == "2 tool results"
            assert CANARY not in repr(web.env.dump())

    run(scenario())
    for record in caplog.records:
        assert CANARY not in record.getMessage()


def bad_parts(*parts: Any) -> list[Any]:
    return [user("u1", "/tools"), {"id": "a1", "role": "assistant", "parts": list(parts)}]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            {
                "messages": [
                    {
                        "id": "u1",
                        "role": "user",
                        "parts": [tool("w", "c", "input-available", input={})],
                    }
                ]
            },
            "messages[0].parts[0]",
        ),
        (
            {"messages": bad_parts({"type": "tool-w", "state": "input-available", "input": {}})},
            "messages[1].parts[0].toolCallId",
        ),
        ({"messages": bad_parts(tool("w", "c", CANARY, input={}))}, "messages[1].parts[0].state"),
        (
            {"messages": bad_parts(tool("w", "c", "input-available", input=CANARY))},
            "messages[1].parts[0].input",
        ),
        (
            {"messages": bad_parts(tool("w", "c", "output-available", input={}))},
            "messages[1].parts[0].output",
        ),
        (
            {"messages": bad_parts(tool("w", "c", "output-error", input={}, errorText=7))},
            "messages[1].parts[0].errorText",
        ),
        (
            {"messages": bad_parts(tool("w", "c", "approval-responded", input={}))},
            "messages[1].parts[0].approval",
        ),
        (
            {
                "messages": bad_parts(
                    tool(
                        "w",
                        "c",
                        "approval-responded",
                        input={},
                        approval={"id": "a", "approved": CANARY},
                    )
                )
            },
            "messages[1].parts[0].approval.approved",
        ),
        (
            {
                "messages": bad_parts(
                    {
                        "type": "dynamic-tool",
                        "toolCallId": "c",
                        "state": "input-available",
                        "input": {},
                    }
                )
            },
            "messages[1].parts[0].toolName",
        ),
        (
            {
                "messages": bad_parts(
                    {"type": "tool-", "toolCallId": "c", "state": "input-available", "input": {}}
                )
            },
            "messages[1].parts[0].type",
        ),
        (
            {"messages": bad_parts(tool("w", "c\ud800", "input-available", input={}))},
            "messages[1].parts[0].toolCallId",
        ),
        ({"tools": {"weather": {}}}, "tools"),
        ({"tools": [{"description": CANARY}]}, "tools[0].name"),
        ({"tools": [{"name": "w", "inputSchema": CANARY}]}, "tools[0].inputSchema"),
        ({"tools": [{"name": "w"}], "toolChoice": CANARY}, "toolChoice"),
        ({"toolChoice": "required"}, "toolChoice"),
        ({"tools": [{"name": "w"}], "parallelToolCalls": "yes"}, "parallelToolCalls"),
    ],
)
def test_malformed_tool_fields_are_refused_naming_the_field(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, body: dict[str, Any], field: str
) -> None:
    caplog.set_level(logging.DEBUG)

    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            before = web.env.dump()
            request = {"id": "bad", "trigger": "submit-message", "messages": [user("u1", "/tools")]}
            sent = json.dumps({**request, **body}).encode()  # ASCII: a lone surrogate as is
            headers = {"content-type": "application/json"}
            response = await web.http.post("/ai-sdk/probe", content=sent, headers=headers)
            assert response.status_code == 400
            error = response.json()["error"]
            assert (error["code"], error["field"]) == ("invalid_argument", field)
            assert CANARY not in response.text
            assert web.env.dump() == before

    run(scenario())
    for record in caplog.records:
        assert CANARY not in record.getMessage()


def test_outputs_for_calls_the_answer_does_not_wait_on_are_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            first = chunks((await ask(web.http, "c-unknown", [user("u1", "/tools")])).text)
            before = web.env.dump()
            stray = tool("weather", "call-9", "output-available", input={}, output=CANARY)
            history = [user("u1", "/tools"), answered(first[0]["messageId"], *outputs(), stray)]
            refused = await ask(web.http, "c-unknown", history)
            assert refused.status_code == 400
            error = refused.json()["error"]
            assert (error["code"], error["field"]) == ("tool_call_unknown", "messages[1].parts")
            assert CANARY not in refused.text
            assert web.env.dump() == before
            # A server-held chat: results for an answer that waits on nothing.
            await web.env.client.create_session(
                "probe", session_id="s-none", history_mode=HistoryMode.SERVER
            )
            held = [user("u1", "hello"), answered("a1", *outputs())]
            before = web.env.dump()
            none = await ask(web.http, "s-none", held)
            assert none.status_code == 409
            assert none.json()["error"]["code"] == "no_pending_tool_calls"
            assert web.env.dump() == before

    run(scenario())
    for record in caplog.records:
        assert CANARY not in record.getMessage()
