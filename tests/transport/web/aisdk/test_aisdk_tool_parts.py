"""The AI SDK front's reading of tool declarations and tool parts, and its tool chunks,
without a server."""

from __future__ import annotations

import json
from typing import Any

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.service import Limits
from agentskit_chat.transport.web.aisdk._chunks import Chunks, Commands
from agentskit_chat.transport.web.aisdk._parts import ChatRequest
from tests.transport.conftest import CANARY


def tool(name: str, call_id: str, state: str, **fields: Any) -> dict[str, Any]:
    return {"type": f"tool-{name}", "toolCallId": call_id, "state": state, **fields}


def parse(*messages: dict[str, Any], **body: Any) -> ChatRequest:
    return ChatRequest.parse({"id": "c", "messages": list(messages), **body}, Limits())


USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "/tools"}]}


def test_declarations_are_the_turns_tools() -> None:
    tools = [
        {"name": "weather", "description": "d", "inputSchema": {"type": "object"}},
        {"name": "clock", "parameters": {"type": "object"}},
        {"name": "bare"},
    ]
    request = parse(
        USER, tools=tools, toolChoice={"type": "tool", "toolName": "clock"}, parallelToolCalls=False
    )
    turn = pb.StreamTurnRequest()
    request.tools.apply(turn)
    assert [(t.name, t.description, t.parameters_json) for t in turn.tools] == [
        ("weather", "d", '{"type":"object"}'),
        ("clock", "", '{"type":"object"}'),
        ("bare", "", ""),
    ]
    assert (turn.tool_choice, turn.parallel_tool_calls) == ("clock", False)
    assert request.answers is None


def test_an_answer_of_two_steps_is_two_assistant_messages_with_tool_messages() -> None:
    answer = {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "Let me look."},
            tool("weather", "c0", "output-available", input={"city": CANARY}, output={"t": 1}),
            {
                "type": "dynamic-tool",
                "toolName": "clock",
                "toolCallId": "c1",
                "state": "output-error",
                "input": None,
                "errorText": "down",
            },
            tool("weather", "c2", "input-streaming", input={}),
            {"type": "step-start"},
            {"type": "text", "text": "Sunny."},
            {"type": "data-agentskit-decision", "data": {}},
        ],
    }
    request = parse(USER, answer, {**USER, "id": "u2"})
    shapes = [
        (m.id, m.role, m.content, [c.id for c in m.tool_calls], m.tool_call_id)
        for m in request.messages
    ]
    assert shapes == [
        ("u1", pb.ROLE_USER, "/tools", [], ""),
        ("a1", pb.ROLE_ASSISTANT, "Let me look.", ["c0", "c1"], ""),
        ("a1:r0", pb.ROLE_TOOL, '{"t":1}', [], "c0"),
        ("a1:r1", pb.ROLE_TOOL, "down", [], "c1"),
        ("a1:1", pb.ROLE_ASSISTANT, "Sunny.", [], ""),
        ("u2", pb.ROLE_USER, "/tools", [], ""),
    ]
    assert json.loads(request.messages[1].tool_calls[0].arguments) == {"city": CANARY}
    assert request.messages[1].tool_calls[1].arguments == ""
    assert request.fields.origins == (0, 1, 1, 1, 1, 2)
    assert request.answers is None  # the last message is the user's


def test_approval_responses_of_the_last_step_are_tool_approvals() -> None:
    answer = {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            tool("weather", "c0", "output-available", input={}, output="sunny"),
            tool(
                "clock",
                "c1",
                "approval-responded",
                input={},
                approval={"id": "x", "approved": False, "reason": CANARY},
            ),
            tool(
                "alarm",
                "c2",
                "approval-responded",
                input={},
                approval={"id": "y", "approved": True},
            ),
        ],
    }
    request = parse(USER, answer)
    assert request.answers is not None
    assert request.continues == "a1"
    assert [(r.tool_call_id, r.content) for r in request.answers.results] == [("c0", '"sunny"')]
    assert [(a.tool_call_id, a.approved, a.reason) for a in request.answers.approvals] == [
        ("c1", False, CANARY),
        ("c2", True, ""),
    ]
    assert request.answers.denied == ("c1",)
    assert request.answers.held == {"c0", "c1", "c2"}
    # Regenerating the answer sends none of it.
    assert parse(USER, answer, trigger="regenerate-message").answers is None


def test_a_denied_call_reads_as_denied_in_later_histories() -> None:
    answer = {
        "id": "a1",
        "role": "assistant",
        "parts": [
            tool("clock", "c1", "output-denied", input={}, approval={"id": "x", "approved": False}),
            {"type": "step-start"},
            {"type": "text", "text": "OK."},
        ],
    }
    request = parse(USER, answer, {**USER, "id": "u2"})
    assert [m.content for m in request.messages if m.role == pb.ROLE_TOOL] == [
        "The user denied this tool call."
    ]


def event(**fields: Any) -> pb.StreamTurnResponse:
    return pb.StreamTurnResponse(turn_id="t", **fields)


def test_an_approved_call_sent_back_updates_its_part_in_place() -> None:
    chunks = Chunks("c", pb.Snapshot(), Commands(pb.Definition()), "a1", (), frozenset({"c1"}))
    found = chunks.of(event(started=pb.TurnStarted(assistant_message_id="other")))
    assert found[0]["messageId"] == "a1"
    assert (
        chunks.of(event(tool_call_started=pb.ToolCallStarted(tool_call_id="c1", name="clock")))
        == []
    )
    assert (
        chunks.of(event(tool_call_delta=pb.ToolCallDelta(tool_call_id="c1", arguments_delta="{}")))
        == []
    )
    ended = pb.ToolCallEnded(tool_call_id="c1", arguments='{"n":1}', wait=pb.TOOL_WAIT_RESULT)
    assert chunks.of(event(tool_call_ended=ended)) == [
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "clock", "input": {"n": 1}}
    ]
    pending = pb.PendingToolCall(tool_call_id="c1", name="clock", wait=pb.TOOL_WAIT_RESULT)
    done = chunks.of(event(completed=pb.TurnCompleted(pending_tool_calls=[pending])))
    assert [c["type"] for c in done] == ["data-agentskit-snapshot", "finish"]
    assert done[-1]["finishReason"] == "tool-calls"


def test_calls_the_stream_did_not_show_are_made_available_at_the_end() -> None:
    chunks = Chunks("c", pb.Snapshot(), Commands(pb.Definition()))
    call = pb.ToolCall(id="c1", name="clock", arguments="not json")
    pending = pb.PendingToolCall(tool_call_id="c1", name="clock", wait=pb.TOOL_WAIT_APPROVAL)
    other = pb.PendingToolCall(tool_call_id="c2", name="alarm", wait=pb.TOOL_WAIT_APPROVAL)
    completed = pb.TurnCompleted(tool_calls=[call], pending_tool_calls=[pending, other])
    found = chunks.of(event(completed=completed))
    assert [c["type"] for c in found] == [
        "tool-input-error",
        "tool-input-available",
        "tool-approval-request",
        "data-agentskit-snapshot",
        "finish",
    ]
    assert found[1]["input"] == {}
    assert found[2] == {
        "type": "tool-approval-request",
        "approvalId": "approval-c2",
        "toolCallId": "c2",
    }
