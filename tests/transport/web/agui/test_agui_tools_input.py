"""Tools in a `RunAgentInput`: what the front reads of them, and the refusals of malformed
tools, toolCalls, tool messages and resume entries (400 naming the field, never its value,
nothing stored)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.transport.web.agui._calls import outcome
from agentskit_chat.transport.web.agui._input import run_input as read_input
from tests.transport.conftest import CANARY, run
from tests.transport.web.agui.runs import TOOLS, calling, post_run, run_input, tool, user
from tests.transport.web.conftest import web_live

CALL = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}


def body(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return run_input("thread-m", "r1", list(messages), **extra)


def test_tools_calls_results_and_resume_entries_become_the_contracts_shapes() -> None:
    entries = [
        {"interruptId": "c1", "status": "resolved", "payload": {"approved": True}},
        {"interruptId": "c2", "status": "resolved", "payload": {"approved": False, "reason": "no"}},
        {"interruptId": "c3", "status": "resolved", "payload": False},
        {"interruptId": "c4", "status": "cancelled"},
    ]
    made = calling("a1", [CALL])
    read = read_input(body(user("u1", "hi"), made, tool("t1", "c1", "sunny"), resume=entries))
    assert read.tools == ()
    with_tools = read_input(body(user("u1", "hi"), tools=TOOLS))
    assert [t.name for t in with_tools.tools] == ["weather", "clock"]
    assert json.loads(with_tools.tools[0].parameters_json) == TOOLS[0]["parameters"]
    assert with_tools.tools[0].description == "The weather in a city"
    messages = read.proto_messages()
    assert [(c.id, c.name, c.arguments) for c in messages[1].tool_calls] == [
        ("c1", "weather", "{}")
    ]
    assert (messages[2].role, messages[2].tool_call_id) == (pb.ROLE_TOOL, "c1")
    assert [(a.tool_call_id, a.approved, a.reason) for a in read.approvals] == [
        ("c1", True, ""),
        ("c2", False, "no"),
        ("c3", False, ""),
        ("c4", False, ""),
    ]
    assert read.continues
    assert read.asks
    assert read.field_of("dispatch.approvals[2].tool_call_id") == "resume[2].interruptId"
    assert read.field_of("tool_results.results[0].content") == "messages[2].content"
    assert read.field_of("tool_results.results[0].message_id") == "messages[2].id"
    assert read.field_of("dispatch.messages[1].tool_calls[0].arguments") == (
        "messages[1].toolCalls[0].function.arguments"
    )
    assert read.field_of("dispatch.messages[2].tool_call_id") == "messages[2].toolCallId"
    assert read.field_of("tools[1].parameters_json") == "tools[1].parameters"


def test_the_outcome_names_what_the_answer_waits_for() -> None:
    result = pb.PendingToolCall(tool_call_id="c1", name="weather", wait=pb.TOOL_WAIT_RESULT)
    approval = pb.PendingToolCall(tool_call_id="c2", name="clock", wait=pb.TOOL_WAIT_APPROVAL)
    assert outcome([]) == {"type": "success"}
    assert outcome([result]) == {"type": "success", "pendingToolCallIds": ["c1"]}
    paused = outcome([result, approval])
    assert paused["type"] == "interrupt"
    assert [(i["id"], i["toolCallId"]) for i in paused["interrupts"]] == [("c2", "c2")]
    assert paused["pendingToolCallIds"] == ["c1"]


MADE = calling("a1", [CALL])
MALFORMED: list[tuple[dict[str, Any], str]] = [
    (body(user("u", CANARY), tools={"0": CANARY}), "tools"),
    (body(user("u", CANARY), tools=[CANARY]), "tools[0]"),
    (body(user("u", CANARY), tools=[{"description": CANARY}]), "tools[0].name"),
    (body(user("u", CANARY), tools=[{"name": "w", "description": 7}]), "tools[0].description"),
    (body(user("u", CANARY), tools=[{"name": "w", "parameters": [CANARY]}]), "tools[0].parameters"),
    (
        body(user("u", CANARY), tools=[{"name": "w", "parameters": {"d": "\ud800"}}]),
        "tools[0].parameters",
    ),
    (
        body(user("u", CANARY), tools=[{"name": "bad name!", "description": CANARY}]),
        "tools[0].name",
    ),
    (
        body(user("u", CANARY), {"id": "a", "role": "assistant", "toolCalls": CANARY}),
        "messages[1].toolCalls",
    ),
    (body(user("u", CANARY), calling("a", [CANARY])), "messages[1].toolCalls[0]"),  # type: ignore[list-item]
    (
        body(user("u", CANARY), calling("a", [{**CALL, "type": CANARY}])),
        "messages[1].toolCalls[0].type",
    ),
    (body(user("u", CANARY), calling("a", [{**CALL, "id": ""}])), "messages[1].toolCalls[0].id"),
    (
        body(user("u", CANARY), calling("a", [{"id": "c", "function": CANARY}])),
        "messages[1].toolCalls[0].function",
    ),
    (
        body(user("u", CANARY), calling("a", [{"id": "c", "function": {"arguments": CANARY}}])),
        "messages[1].toolCalls[0].function.name",
    ),
    (
        body(
            user("u", CANARY),
            calling("a", [{"id": "c", "function": {"name": "w", "arguments": {}}}]),
        ),
        "messages[1].toolCalls[0].function.arguments",
    ),
    (
        body(
            calling("a", [{**CALL, "function": {"name": "w", "arguments": f'["{CANARY}"]'}}]),
            user("u", "hi"),
        ),
        "messages[0].toolCalls[0].function.arguments",
    ),
    (
        body(user("u", "hi"), MADE, {"id": "t", "role": "tool", "content": CANARY}),
        "messages[2].toolCallId",
    ),
    (body(user("u", "hi"), MADE, tool("t", "c1", 5)), "messages[2].content"),  # type: ignore[arg-type]
    (body(user("u", CANARY), resume={"0": CANARY}), "resume"),
    (body(user("u", CANARY), resume=[CANARY]), "resume[0]"),
    (
        body(user("u", CANARY), resume=[{"status": "resolved", "payload": True}]),
        "resume[0].interruptId",
    ),
    (body(user("u", CANARY), resume=[{"interruptId": "c1", "status": CANARY}]), "resume[0].status"),
    (
        body(user("u", CANARY), resume=[{"interruptId": "c1", "status": "resolved"}]),
        "resume[0].payload",
    ),
    (
        body(
            user("u", CANARY),
            resume=[{"interruptId": "c1", "status": "resolved", "payload": {"approved": CANARY}}],
        ),
        "resume[0].payload.approved",
    ),
    (
        body(
            user("u", CANARY),
            resume=[
                {
                    "interruptId": "c1",
                    "status": "resolved",
                    "payload": {"approved": False, "reason": [CANARY]},
                }
            ],
        ),
        "resume[0].payload.reason",
    ),
]


@pytest.mark.parametrize(("request_body", "field"), MALFORMED, ids=[f for _, f in MALFORMED])
def test_malformed_tool_input_is_a_400_naming_the_field_and_stores_nothing(
    tmp_path: Path, request_body: dict[str, Any], field: str
) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            before = web.env.dump()
            answer = await post_run(web.http, "probe", json.dumps(request_body).encode())
            assert answer.status == 400, answer.body
            error = json.loads(answer.body)["error"]
            assert error["field"] == field
            assert field in error["message"]
            assert CANARY not in answer.body.decode()
            assert web.env.dump() == before

    run(scenario())


def test_a_new_thread_has_no_answer_for_results_or_decisions(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            before = web.env.dump()
            entry = {"interruptId": "c1", "status": "cancelled"}
            for request_body in (
                body(user("u", "hi"), MADE, tool("t", "c1", CANARY), tools=TOOLS),
                body(user("u", "hi"), MADE, resume=[entry]),
            ):
                answer = await post_run(web.http, "probe", request_body)
                assert answer.status == 409
                assert json.loads(answer.body)["error"]["code"] == "no_pending_tool_calls"
                assert CANARY not in answer.body.decode()
            assert web.env.dump() == before

    run(scenario())


def test_a_bad_thread_id_is_named_as_the_request_names_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            answer = await post_run(
                web.http, "probe", run_input("x" * 300, "r1", [user("u", "hi")])
            )
            assert answer.status == 400
            error = json.loads(answer.body)["error"]
            assert error["field"] == "threadId"
            assert "threadId" in error["message"]
            assert "session_id" not in error["message"]

    run(scenario())
