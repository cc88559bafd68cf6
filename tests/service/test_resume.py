"""A retry of a failed agentic turn resumes after the server tool rounds it completed: their
calls do not run again (the `count` tool of the real orders MCP server counts its runs),
and the failed turn's record keeps the rounds sealed only."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from agentskit_chat.conversation import ChatDefinition, Message, Role, parse_definition
from agentskit_chat.mcp import ServerTools
from agentskit_chat.models import AdapterRegistry, ModelChunk, ModelError, ModelRequest
from agentskit_chat.service import (
    Approval,
    Catalog,
    ChatService,
    Completed,
    Dispatch,
    Failed,
    Limits,
    Retry,
    Submit,
    ToolRan,
    ToolResults,
    TurnRequest,
)
from agentskit_chat.storage import HistoryMode, open_sqlite_store
from tests.mcp.conftest import BOUND, stdio_server
from tests.service.test_agent_loop import KEY, calls, executions, shop, text, turn
from tests.service.test_tool_turns import Scripted

SECRET = "canary-round-3c1d"
"""Text of the arguments and of the answers: never in the stored record in the clear."""


class Failing(Scripted):
    """A scripted model whose answers may be a ModelError, raised instead of answering."""

    def __init__(self, *answers: list[ModelChunk] | ModelError) -> None:
        super().__init__()
        self.script = list(answers)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        self.requests.append(request)
        answer = self.script.pop(0)
        if isinstance(answer, ModelError):
            raise answer
        for chunk in answer:
            yield chunk


def broken() -> ModelError:
    return ModelError("model_unavailable", "The model is unavailable.", retryable=True)


@asynccontextmanager
async def served(
    tmp_path: Path,
    model: Scripted,
    limits: Limits | None = None,
    definition: ChatDefinition | None = None,
) -> AsyncIterator[ChatService]:
    """The shop chat (or `definition`) with the orders server over stdio, on SQLite in
    `tmp_path`."""
    definition = definition or shop(tmp_path / "record.jsonl")
    store = await open_sqlite_store(tmp_path / "sessions.db")
    with (tmp_path / "stderr.txt").open("w", encoding="utf-8") as stderr:
        tools = ServerTools([definition], server_stderr=stderr)
        async with asyncio.timeout(BOUND):
            await tools.start()
        chat = ChatService(
            Catalog([definition]),
            store,
            digest_key=KEY,
            adapters=AdapterRegistry({"scripted": lambda options: model}),
            limits=limits or Limits(),
            server_tools=tools,
        )
        try:
            await chat.create_session("shop", "s1", HistoryMode.SERVER)
            yield chat
        finally:
            await chat.close()
            await tools.close()


def stored_record(tmp_path: Path, session_id: str = "s1") -> bytes:
    with sqlite3.connect(tmp_path / "sessions.db") as connection:
        row = connection.execute(
            "SELECT CAST(record AS BLOB) FROM sessions WHERE session_id = ?", (session_id,)
        ).fetchone()
    connection.close()
    return bytes(row[0])


def test_a_retry_resumes_after_the_rounds_the_failed_turn_ran(tmp_path: Path) -> None:
    model = Failing(
        calls(("c1", "count", {"key": SECRET})),
        broken(),  # round 2: the model fails
        text(f"Counted {SECRET}."),
    )

    async def scenario() -> None:
        async with served(tmp_path, model) as chat:
            first = await turn(chat, TurnRequest("s1", "t1", Submit(f"count {SECRET}")))
            failed = first[-1]
            assert isinstance(failed, Failed)
            assert failed.code == "model_unavailable"
            assert len(executions(tmp_path)) == 1
            assert (await chat.get_session("s1")).messages == ()  # nothing committed
            raw = stored_record(tmp_path)
            assert b'"rounds":{"sealed":' in raw
            assert SECRET.encode() not in raw  # the rounds are sealed, never in the clear
            assert b"counted" not in raw

            again = await turn(chat, TurnRequest("s1", "t2", Submit(f"count {SECRET}")))
            done = again[-1]
            assert isinstance(done, Completed)
            assert done.content == f"Counted {SECRET}."
            ran = [e for e in again if isinstance(e, ToolRan)]  # the recorded result, shown
            assert [(r.call_id, r.content) for r in ran] == [("c1", f"counted {SECRET}")]
            assert len(executions(tmp_path)) == 1  # count ran once, for both attempts
            asked = model.requests[-1].messages
            assert [(m.role.value, m.tool_call_id) for m in asked[-3:]] == [
                ("user", None),
                ("assistant", None),
                ("tool", "c1"),
            ]
            assert [c.id for c in asked[-2].tool_calls] == ["c1"]
            history = (await chat.get_session("s1")).messages
            assert [m.role.value for m in history] == ["user", "assistant", "tool", "assistant"]
            assert history[-1].id == done.assistant_message_id
            assert b'"rounds"' not in stored_record(tmp_path)  # resumed: the rounds are spent
            repeated = await turn(chat, TurnRequest("s1", "t1", Submit(f"count {SECRET}")))
            assert isinstance(repeated[-1], Failed)  # a repeated turn id: its failure again
            assert len(executions(tmp_path)) == 1
            assert len(model.requests) == 3

    asyncio.run(scenario())


def test_a_retry_of_the_failed_rounds_limit_and_a_failing_retry(tmp_path: Path) -> None:
    """The rounds of a turn that ran out of rounds, and of a resumed turn that failed again,
    are kept for the next retry: each call runs once in all."""
    model = Failing(
        calls(("c1", "count", {"key": "k1"})),
        calls(("c2", "count", {"key": "k2"})),  # past the one round a turn may run
        broken(),  # the first retry: resumed after c1, then the model fails
        text("Both counted."),
    )

    async def scenario() -> None:
        async with served(tmp_path, model, Limits(max_tool_rounds=1)) as chat:
            first = await turn(chat, TurnRequest("s1", "t1", Submit("count twice")))
            assert isinstance(first[-1], Failed)
            assert first[-1].code == "tool_rounds"
            assert [e["key"] for e in executions(tmp_path)] == ["k1"]
            second = await turn(chat, TurnRequest("s1", "t2", Submit("count twice")))
            assert isinstance(second[-1], Failed)
            third = await turn(chat, TurnRequest("s1", "t3", Submit("count twice")))
            assert isinstance(third[-1], Completed)
            assert [e["key"] for e in executions(tmp_path)] == ["k1"]
            assert [m.tool_call_id for m in model.requests[-1].messages if m.tool_call_id] == ["c1"]

    asyncio.run(scenario())


def test_another_request_does_not_resume(tmp_path: Path) -> None:
    """Rounds belong to the request that ran them: another message asks the model afresh,
    and a retry of the earlier message after that runs its calls again."""
    model = Failing(
        calls(("c1", "count", {"key": "k1"})),
        broken(),
        text("Something else."),
        calls(("c3", "count", {"key": "k1"})),
        text("Counted."),
    )

    async def scenario() -> None:
        async with served(tmp_path, model) as chat:
            await turn(chat, TurnRequest("s1", "t1", Submit("count it")))
            other = await turn(chat, TurnRequest("s1", "t2", Submit("something else")))
            assert isinstance(other[-1], Completed)
            assert not [m for m in model.requests[2].messages if m.role.value == "tool"]
            again = await turn(chat, TurnRequest("s1", "t3", Submit("count it")))
            assert isinstance(again[-1], Completed)
            assert [e["key"] for e in executions(tmp_path)] == ["k1", "k1"]

    asyncio.run(scenario())


def test_a_retry_operation_resumes_a_failed_retry(tmp_path: Path) -> None:
    """Retry of a user message whose earlier retry failed after a round: the same request."""
    model = Failing(
        text("Hello."),
        calls(("c1", "count", {"key": "k1"})),
        broken(),
        text("Counted."),
    )

    async def scenario() -> None:
        async with served(tmp_path, model) as chat:
            await turn(chat, TurnRequest("s1", "t1", Submit("hi")))
            user = (await chat.get_session("s1")).messages[0].id
            failed = await turn(chat, TurnRequest("s1", "t2", Retry(user)))
            assert isinstance(failed[-1], Failed)
            retried = await turn(chat, TurnRequest("s1", "t3", Retry(user)))
            assert isinstance(retried[-1], Completed)
            assert retried[-1].content == "Counted."
            assert [e["key"] for e in executions(tmp_path)] == ["k1"]
            history = (await chat.get_session("s1")).messages
            assert [m.role.value for m in history] == ["user", "assistant", "tool", "assistant"]

    asyncio.run(scenario())


def test_a_call_its_deadline_stopped_is_of_unknown_outcome_and_never_run_again(
    tmp_path: Path,
) -> None:
    """The turn's deadline passes while a server tool runs: the failure names the call as
    of unknown outcome; a retry gives the model an `unknown_outcome` result for it, and the
    call of the same answer that had not started runs then."""
    definition = parse_definition(
        {
            "id": "shop",
            "revision": 1,
            "model": {"adapter": "scripted"},
            "conversation": {"initial": "idle", "states": {"idle": {}}},
            "mcp_servers": {"orders": stdio_server(tmp_path / "record.jsonl")},
            "tools": {name: {"server": "orders"} for name in ("count_slow", "count")},
        }
    )
    model = Failing(
        calls(("c1", "count_slow", {"key": "k1", "gate": "never"}), ("c2", "count", {"key": "k2"})),
        text("Done."),
    )

    async def scenario() -> None:
        limits = Limits(turn_timeout=3.0, lease_ttl=4.0)
        async with served(tmp_path, model, limits, definition) as chat:
            first = await turn(chat, TurnRequest("s1", "t1", Submit("cancel")))
            failed = first[-1]
            assert isinstance(failed, Failed)
            assert failed.code == "deadline_exceeded"
            assert [e["key"] for e in executions(tmp_path)] == ["k1"]
            record = await chat.get_turn("s1", "t1")
            assert [(c.call_id, c.name) for c in record.unknown] == [("c1", "count_slow")]

            again = await turn(chat, TurnRequest("s1", "t2", Submit("cancel")))
            assert isinstance(again[-1], Completed)
            ran = [(e.call_id, e.error_type) for e in again if isinstance(e, ToolRan)]
            assert ran == [("c1", "unknown_outcome"), ("c2", None)]
            assert [e["key"] for e in executions(tmp_path)] == ["k1", "k2"]  # k1 not again
            asked = model.requests[-1].messages
            assert [m.tool_call_id for m in asked if m.role.value == "tool"] == ["c1", "c2"]

    asyncio.run(scenario())


def test_a_client_held_history_sent_again_resumes_too(tmp_path: Path) -> None:
    """Dispatch: the renderer holds the history; the same messages sent again after the
    failure resume after the recorded round, which the events show again."""
    model = Failing(calls(("c1", "count", {"key": SECRET})), broken(), text("Counted."))
    history = (Message("u1", Role.USER, "count it"),)

    async def scenario() -> None:
        async with served(tmp_path, model) as chat:
            await chat.create_session("shop", "s2", HistoryMode.CLIENT)
            first = await turn(chat, TurnRequest("s2", "t1", Dispatch(history)))
            assert isinstance(first[-1], Failed)
            assert SECRET.encode() not in stored_record(tmp_path, "s2")
            again = await turn(chat, TurnRequest("s2", "t2", Dispatch(history)))
            assert isinstance(again[-1], Completed)
            ran = [(e.call_id, e.content) for e in again if isinstance(e, ToolRan)]
            assert ran == [("c1", f"counted {SECRET}")]
            assert [e["key"] for e in executions(tmp_path)] == [SECRET]

    asyncio.run(scenario())


def test_a_retry_of_an_approval_does_not_run_the_approved_call_again(tmp_path: Path) -> None:
    """The approved call runs, then the model fails; the same approval sent again (a new
    turn id) resumes with the recorded result."""
    model = Failing(calls(("c1", "count", {"key": "paid"})), broken(), text("Paid."))

    async def scenario() -> None:
        definition = shop(tmp_path / "record.jsonl", approval=True)
        async with served(tmp_path, model, None, definition) as chat:
            await turn(chat, TurnRequest("s1", "t1", Submit("pay")))
            approved = ToolResults(approvals=(Approval("c1", True),))
            second = await turn(chat, TurnRequest("s1", "t2", approved))
            assert isinstance(second[-1], Failed)
            assert [e["key"] for e in executions(tmp_path)] == ["paid"]
            third = await turn(chat, TurnRequest("s1", "t3", approved))
            assert isinstance(third[-1], Completed)
            assert third[-1].content == "Paid."
            assert [(e.call_id, e.content) for e in third if isinstance(e, ToolRan)] == [
                ("c1", "counted paid")
            ]
            assert [e["key"] for e in executions(tmp_path)] == ["paid"]
            history = (await chat.get_session("s1")).messages
            assert [m.role.value for m in history] == ["user", "assistant", "tool", "assistant"]

    asyncio.run(scenario())
