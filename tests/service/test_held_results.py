"""Client-held histories and answers that call server and client tools at once: the turn
keeps the server's results (sealed), and the turn that continues it gives the model the
ones the client's history lacks, as a renderer that shows no server tools (the OpenAI
front's client) sends the answer back with its own call only."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentskit_chat.conversation import Message, Role, ToolCall
from agentskit_chat.models import ToolOptions, ToolSpec
from agentskit_chat.service import Completed, Dispatch, TurnRequest
from agentskit_chat.storage import HistoryMode
from tests.service.test_agent_loop import calls, text, turn
from tests.service.test_resume import served, stored_record
from tests.service.test_tool_turns import Scripted

SECRET = "canary-held-result-4417"
CLIENT = ToolOptions((ToolSpec("local_time", "The time", {"type": "object"}),))
USER = Message("u1", Role.USER, "time?")
OWN_CALL = ToolCall("c2", "local_time", "{}")


def test_the_servers_results_the_client_lacks_reach_the_model(tmp_path: Path) -> None:
    mixed = calls(("c1", "lookup_order", {"order_id": SECRET}), ("c2", "local_time", {}))
    model = Scripted(mixed, text("It is noon and your order shipped."), text("Still noon."))
    history = (
        USER,
        Message("a1", Role.ASSISTANT, "", (OWN_CALL,)),  # the server's call not shown
        Message("r1", Role.TOOL, "12:00", tool_call_id="c2"),
    )

    async def scenario() -> None:
        async with served(tmp_path, model) as chat:
            await chat.create_session("shop", "s2", HistoryMode.CLIENT)
            first = await turn(chat, TurnRequest("s2", "t1", Dispatch((USER,)), tools=CLIENT))
            done = first[-1]
            assert isinstance(done, Completed)
            assert [p.call_id for p in done.pending] == ["c2"]
            assert SECRET.encode() not in stored_record(tmp_path, "s2")  # kept sealed
            second = await turn(chat, TurnRequest("s2", "t2", Dispatch(history), tools=CLIENT))
            assert isinstance(second[-1], Completed)
            sent = model.requests[1].messages
            assert [(m.role, m.tool_call_id) for m in sent] == [
                (Role.USER, None),
                (Role.ASSISTANT, None),
                (Role.TOOL, "c1"),
                (Role.TOOL, "c2"),
            ]
            assert [c.id for c in sent[1].tool_calls] == ["c2", "c1"]
            assert sent[2].content == f"order {SECRET}: 2 items, shipped"
            again = Message("u2", Role.USER, "and now?")
            later = (*history, Message("a2", Role.ASSISTANT, "It is noon."), again)
            third = await turn(chat, TurnRequest("s2", "t3", Dispatch(later), tools=CLIENT))
            assert isinstance(third[-1], Completed)  # a new request: nothing is added
            assert [m.tool_call_id for m in model.requests[2].messages] == [
                None,
                None,
                "c2",
                None,
                None,
            ]

    asyncio.run(scenario())


def test_a_client_that_sends_the_servers_results_itself_gets_nothing_twice(
    tmp_path: Path,
) -> None:
    """A renderer that shows server tools (AG-UI, the AI SDK) adds the server's call and
    result itself: the model is asked with them once."""
    mixed = calls(("c1", "lookup_order", {"order_id": "7"}), ("c2", "local_time", {}))
    model = Scripted(mixed, text("Noon; shipped."))

    async def scenario() -> None:
        async with served(tmp_path, model) as chat:
            await chat.create_session("shop", "s2", HistoryMode.CLIENT)
            await turn(chat, TurnRequest("s2", "t1", Dispatch((USER,)), tools=CLIENT))
            server_call = ToolCall("c1", "lookup_order", '{"order_id": "7"}')
            history = (
                USER,
                Message("a1", Role.ASSISTANT, "", (server_call, OWN_CALL)),
                Message("r0", Role.TOOL, "order 7: 2 items, shipped", tool_call_id="c1"),
                Message("r1", Role.TOOL, "12:00", tool_call_id="c2"),
            )
            second = await turn(chat, TurnRequest("s2", "t2", Dispatch(history), tools=CLIENT))
            assert isinstance(second[-1], Completed)
            sent = model.requests[1].messages
            assert [m.tool_call_id for m in sent] == [None, None, "c1", "c2"]
            assert [c.id for c in sent[1].tool_calls] == ["c1", "c2"]

    asyncio.run(scenario())
