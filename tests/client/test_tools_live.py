"""The Python client's tool round against a real server: typed tool events, the calls on
the completed turn and its record, results and approvals sent back, and the README's
example as written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from agentskit_chat_client import (
    ChatError,
    Dispatch,
    HistoryMode,
    Message,
    Submit,
    ToolApproval,
    ToolCallDelta,
    ToolCallEnded,
    ToolCallStarted,
    ToolDeclaration,
    ToolResult,
    ToolResults,
    TurnTools,
)
from tests.transport.conftest import live, run

README = Path(__file__).resolve().parents[2] / "client" / "python" / "README.md"
TOOLS = (ToolDeclaration("weather", "The weather", {"type": "object"}), ToolDeclaration("clock"))


def test_a_round_of_typed_tool_events_and_results(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            first = await env.client.run_turn(
                sid, Submit("/tools"), tools=TurnTools(TOOLS, choice="auto", parallel=True)
            )
            started = [e for e in first.events if isinstance(e, ToolCallStarted)]
            deltas = [e for e in first.events if isinstance(e, ToolCallDelta)]
            ended = [e for e in first.events if isinstance(e, ToolCallEnded)]
            assert [(e.tool_call_id, e.name) for e in started] == [
                ("call-0", "weather"),
                ("call-1", "clock"),
            ]
            assert "".join(d.arguments_delta for d in deltas if d.tool_call_id == "call-1") == (
                '{"n":1}'
            )
            assert [(e.arguments, e.wait) for e in ended] == [
                ('{"n":0}', "result"),
                ('{"n":1}', "result"),
            ]
            assert first.completed is not None
            assert first.completed.finish_reason == "tool_calls"
            assert [c.parsed_arguments() for c in first.completed.tool_calls] == [
                {"n": 0},
                {"n": 1},
            ]
            assert [p.name for p in first.pending_tool_calls] == ["weather", "clock"]
            record = await env.client.get_turn(sid, first.turn_id)
            assert [p.tool_call_id for p in record.pending_tool_calls] == ["call-0", "call-1"]

            answers = ToolResults([ToolResult("call-0", "sunny"), ToolResult("call-1", "9:00")])
            second = await env.client.run_turn(sid, answers, tools=TOOLS)
            assert second.started is not None
            assert second.started.operation == "tool_results"
            assert second.text == "2 tool results"
            history = await env.client.get_session(sid)
            assert [m.role for m in history.messages] == [
                "user",
                "assistant",
                "tool",
                "tool",
                "assistant",
            ]
            assert [c.id for c in history.messages[1].tool_calls] == ["call-0", "call-1"]
            assert history.messages[3].tool_call_id == "call-1"

    run(scenario())


def test_a_client_held_history_carries_calls_and_results(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            created = await env.client.create_session("probe", history_mode=HistoryMode.CLIENT)
            sid = created.session_id
            user = Message("u1", "user", "/tools")
            first = await env.client.run_turn(sid, Dispatch([user]), tools=TOOLS)
            assert first.completed is not None
            answer = Message(
                first.completed.assistant_message_id,
                "assistant",
                "",
                tool_calls=first.completed.tool_calls,
            )
            results = [
                Message(f"r{i}", "tool", "done", tool_call_id=call.id)
                for i, call in enumerate(first.completed.tool_calls)
            ]
            second = await env.client.run_turn(
                sid, Dispatch([user, answer, *results], approvals=()), tools=TOOLS
            )
            assert second.text == "2 tool results"

    run(scenario())


def test_an_approval_for_a_call_that_needs_none_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            await env.client.run_turn(sid, Submit("/tools"), tools=TOOLS)
            before = env.dump()
            with pytest.raises(ChatError) as refused:
                await env.client.run_turn(
                    sid,
                    ToolResults(
                        [ToolResult("call-0", "x"), ToolResult("call-1", "y")],
                        [ToolApproval("call-0", approved=True)],
                    ),
                    tools=TOOLS,
                )
            assert refused.value.reason == "ERROR_REASON_TOOL_CALL_UNKNOWN"
            assert env.dump() == before

    run(scenario())


def test_the_readme_tool_example_runs_as_written(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    (block,) = re.findall(r"```python tools\n(.*?)```", text, re.S)
    namespace: dict[str, Any] = {"__name__": "readme_tools"}
    exec(compile(block, str(README), "exec"), namespace)

    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            assert await namespace["ask_with_tools"](env.client, sid, "/tools") == (
                "1 tool results"
            )
            assert await namespace["ask_with_tools"](env.client, sid, "hello") == "model answer"

    run(scenario())
