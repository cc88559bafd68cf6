"""AG-UI runs with frontend tools through a live listener and the probe model: a tool round's
events and ids, the run that continues it with the results, reattach and repeat across
tool events, and the approvals an interrupt asks for."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.transport.conftest import CANARY, run
from tests.transport.web.agui.runs import (
    TOOLS,
    Answer,
    calling,
    post_run,
    run_input,
    tool,
    user,
)
from tests.transport.web.conftest import web_live

CONTINUE = {"agentskit-on-disconnect": "continue"}
ASK = user("u1", "/tools")


def positions(answer: Answer) -> list[tuple[int, ...]]:
    return [tuple(int(p) for p in str(event_id).split(".")) for event_id, _ in answer.events]


def answered(answer: Answer, *results: tuple[str, str]) -> list[dict[str, Any]]:
    """The input HttpAgent sends after a tool round: the question, the answer that made
    the calls and a tool message per result."""
    made = calling(answer.finished()["result"]["assistantMessageId"], answer.calls())
    return [ASK, made, *(tool(f"t-{call}", call, text) for call, text in results)]


def test_a_tool_round_streams_the_calls_and_the_next_run_continues_the_answer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            body = run_input("thread-t", "r1", [ASK], tools=TOOLS)
            first = await post_run(web.http, "probe", body)
            assert first.status == 200
            assert first.types == [
                "RUN_STARTED",
                "STATE_SNAPSHOT",
                "CUSTOM",
                "TOOL_CALL_START",
                "TOOL_CALL_START",
                *["TOOL_CALL_ARGS"] * 4,
                "TOOL_CALL_END",
                "TOOL_CALL_END",
                "RUN_FINISHED",
            ]
            done = first.finished()
            answer_id = done["result"]["assistantMessageId"]
            starts = first.of("TOOL_CALL_START")
            assert [(e["toolCallId"], e["toolCallName"]) for e in starts] == [
                ("call-0", "weather"),
                ("call-1", "clock"),
            ]
            assert {e["parentMessageId"] for e in starts} == {answer_id}
            assert [c["function"]["arguments"] for c in first.calls()] == ['{"n":0}', '{"n":1}']
            assert [e["toolCallId"] for e in first.of("TOOL_CALL_END")] == ["call-0", "call-1"]
            assert done["outcome"] == {
                "type": "success",
                "pendingToolCallIds": ["call-0", "call-1"],
            }
            assert positions(first) == sorted(set(positions(first)))
            assert web.env.probe.model_calls == [1]

            # The tools ran in the browser: their results continue the same answer.
            results = answered(first, ("call-0", CANARY), ("call-1", "9:00"))
            second = await post_run(
                web.http, "probe", run_input("thread-t", "r2", results, tools=TOOLS)
            )
            assert second.status == 200
            assert second.text() == "2 tool results"
            assert second.finished()["outcome"] == {"type": "success"}
            assert web.env.probe.model_calls == [1, 4]
            # A repeat of the first run: the recorded calls, the model not asked again.
            again = await post_run(web.http, "probe", body)
            assert [
                (e["toolCallId"], e["parentMessageId"]) for e in again.of("TOOL_CALL_START")
            ] == [
                ("call-0", answer_id),
                ("call-1", answer_id),
            ]
            assert again.finished()["outcome"] == done["outcome"]
            assert web.env.probe.model_calls == [1, 4]
            # A result for a call the answer never made is refused, naming the message.
            before = web.env.dump()
            stray = [*results, tool("t-stray", "call-9", CANARY)]
            late = await post_run(
                web.http, "probe", run_input("thread-t", "r3", stray, tools=TOOLS)
            )
            assert late.status == 400
            error = json.loads(late.body)["error"]
            assert (error["code"], error["field"]) == (
                "tool_call_unknown",
                "messages[4].toolCallId",
            )
            assert CANARY not in late.body.decode()
            assert web.env.dump() == before

    run(scenario())
    assert all(CANARY not in record.getMessage() for record in caplog.records)


def test_a_server_held_thread_stores_the_results_and_shows_them_when_reopened(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            sid = (await web.env.client.create_session("probe")).session_id
            first = await post_run(web.http, "probe", run_input(sid, "r1", [ASK], tools=TOOLS))
            assert first.finished()["outcome"]["pendingToolCallIds"] == ["call-0", "call-1"]
            results = answered(first, ("call-0", "sunny"), ("call-1", "9:00"))
            second = await post_run(web.http, "probe", run_input(sid, "r2", results, tools=TOOLS))
            assert second.text() == "2 tool results"
            got = await web.env.client.get_session(sid)
            stored = [(m.id, m.role, m.tool_call_id) for m in got.messages]
            assert stored[2:4] == [("t-call-0", "tool", "call-0"), ("t-call-1", "tool", "call-1")]
            reopened = await post_run(web.http, "probe", run_input(sid, "r3"))
            (snapshot,) = reopened.of("MESSAGES_SNAPSHOT")
            made = snapshot["messages"][1]
            assert made["toolCalls"] == first.calls()
            assert [m.get("toolCallId") for m in snapshot["messages"][2:4]] == ["call-0", "call-1"]
            assert reopened.finished()["outcome"] == {"type": "success"}
            # The results again: the answer waits on nothing any more.
            before = web.env.dump()
            late = await post_run(web.http, "probe", run_input(sid, "r4", results, tools=TOOLS))
            assert late.status == 409
            assert json.loads(late.body)["error"]["code"] == "no_pending_tool_calls"
            assert web.env.dump() == before

    run(scenario())


def test_a_reattach_across_tool_events_loses_nothing_and_repeats_their_ids(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            body = run_input("thread-a", "r1", [ASK], tools=TOOLS)
            cut = await post_run(web.http, "probe", body, CONTINUE, stop_after=5)
            assert cut.types[-2:] == ["TOOL_CALL_START", "TOOL_CALL_START"]
            last_id = cut.events[-1][0]
            assert last_id is not None
            rest = await post_run(web.http, "probe", body, {"last-event-id": last_id})
            assert rest.types == [
                *(["TOOL_CALL_ARGS"] * 4),
                "TOOL_CALL_END",
                "TOOL_CALL_END",
                "RUN_FINISHED",
            ]
            whole = cut.events + rest.events
            again = await post_run(web.http, "probe", body, {"last-event-id": "0.0"})
            assert again.events == whole[1:]
            middle = whole[6][0]
            assert middle is not None
            tail = await post_run(web.http, "probe", body, {"last-event-id": middle})
            assert tail.events == whole[7:]
            assert web.env.probe.model_calls == [1]

    run(scenario())


@pytest.mark.parametrize("held", ["server", "client"])
def test_an_approval_interrupts_the_run_and_resume_entries_decide_it(
    tmp_path: Path, held: str
) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            sid = "thread-approve"
            if held == "server":
                sid = (await web.env.client.create_session("probe-approve")).session_id
            first = await post_run(
                web.http, "probe-approve", run_input(sid, "r1", [ASK], tools=TOOLS)
            )
            outcome = first.finished()["outcome"]
            assert outcome["type"] == "interrupt"
            (interrupt,) = outcome["interrupts"]
            assert (interrupt["id"], interrupt["toolCallId"], interrupt["reason"]) == (
                "call-1",
                "call-1",
                "tool_call",
            )
            assert interrupt["responseSchema"]["required"] == ["approved"]
            assert outcome["pendingToolCallIds"] == ["call-0"]
            results = answered(first, ("call-0", "sunny"))
            # No decision on the interrupt: refused, nothing stored.
            before = web.env.dump()
            undecided = await post_run(web.http, "probe-approve", run_input(sid, "r2", results))
            assert (undecided.status, web.env.dump()) == (400, before)
            # Approved: the call goes back to the browser to run, not started again.
            approve = [
                {"interruptId": "call-1", "status": "resolved", "payload": {"approved": True}}
            ]
            approved = await post_run(
                web.http,
                "probe-approve",
                run_input(sid, "r2", results, tools=TOOLS, resume=approve),
            )
            assert approved.types == ["RUN_STARTED", "STATE_SNAPSHOT", "CUSTOM", "RUN_FINISHED"]
            assert approved.finished()["outcome"] == {
                "type": "success",
                "pendingToolCallIds": ["call-1"],
            }
            assert web.env.probe.model_calls == [1]
            ran = [*results, tool("t-call-1", "call-1", "9:00")]
            third = await post_run(
                web.http, "probe-approve", run_input(sid, "r3", ran, tools=TOOLS)
            )
            assert third.text() == "2 tool results"

    run(scenario())


@pytest.mark.parametrize("decision", ["deny", "cancel"])
def test_a_denied_call_reaches_the_model_as_a_denied_result(
    tmp_path: Path, decision: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    entry: dict[str, Any] = {"interruptId": "call-1", "status": "cancelled"}
    if decision == "deny":
        payload = {"approved": False, "reason": CANARY}
        entry = {"interruptId": "call-1", "status": "resolved", "payload": payload}

    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            body = run_input("thread-d", "r1", [ASK], tools=TOOLS)
            first = await post_run(web.http, "probe-approve", body)
            assert first.finished()["outcome"]["type"] == "interrupt"
            results = answered(first, ("call-0", "sunny"))
            denied = await post_run(
                web.http,
                "probe-approve",
                run_input("thread-d", "r2", results, tools=TOOLS, resume=[entry]),
            )
            assert denied.text() == "2 tool results"  # the denial is the second result
            assert CANARY not in str(denied.events)
            # An interrupt no answer raised is refused, naming the resume entry.
            stray = {**entry, "interruptId": "call-9"}
            again = run_input("thread-d", "r3", results, tools=TOOLS, resume=[entry, stray])
            late = await post_run(web.http, "probe-approve", again)
            assert late.status == 400
            error = json.loads(late.body)["error"]
            assert (error["code"], error["field"]) == ("tool_call_unknown", "resume[1].interruptId")
            assert CANARY not in late.body.decode()

    run(scenario())
    assert all(CANARY not in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("held", ["server", "client"])
def test_a_reopened_thread_is_told_what_its_last_answer_still_waits_on(
    tmp_path: Path, held: str
) -> None:
    """A page reopening a thread (a run with no new message) gets the run outcome the run
    that made the calls ended with: the interrupts and pending ids, until they are answered."""

    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            sid = "thread-reopen"
            if held == "server":
                sid = (await web.env.client.create_session("probe-approve")).session_id
            first = await post_run(
                web.http, "probe-approve", run_input(sid, "r1", [ASK], tools=TOOLS)
            )
            waiting = first.finished()["outcome"]
            assert waiting["type"] == "interrupt"
            before = web.env.dump()
            reopened = await post_run(web.http, "probe-approve", run_input(sid, "open-1"))
            assert reopened.types[-1] == "RUN_FINISHED"
            assert reopened.finished()["outcome"] == waiting
            assert web.env.dump() == before  # reopening runs no turn and stores nothing
            results = answered(first, ("call-0", "sunny"))
            approve = [
                {"interruptId": "call-1", "status": "resolved", "payload": {"approved": True}}
            ]
            body = run_input(sid, "r2", results, tools=TOOLS, resume=approve)
            approved = await post_run(web.http, "probe-approve", body)
            still = approved.finished()["outcome"]
            assert still == {"type": "success", "pendingToolCallIds": ["call-1"]}
            again = await post_run(web.http, "probe-approve", run_input(sid, "open-2"))
            assert again.finished()["outcome"] == still
            ran = [*results, tool("t-call-1", "call-1", "9:00")]
            third = await post_run(
                web.http, "probe-approve", run_input(sid, "r3", ran, tools=TOOLS)
            )
            assert third.text() == "2 tool results"
            done = await post_run(web.http, "probe-approve", run_input(sid, "open-3"))
            assert done.finished()["outcome"] == {"type": "success"}

    run(scenario())
