"""The turn's agent loop: server tool calls the model makes are run by the service, against
a real MCP server over stdio, and their results go back to the model within the turn,
round after round, until it answers or a bound stops it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agentskit_chat.conversation import ChatDefinition, Lease, PendingCall, Role, parse_definition
from agentskit_chat.mcp import ServerTools
from agentskit_chat.models import (
    AdapterRegistry,
    FinishChunk,
    ModelChunk,
    TextChunk,
    ToolCallDeltaChunk,
    ToolCallStartChunk,
    ToolOptions,
    ToolSpec,
)
from agentskit_chat.service import (
    Approval,
    Catalog,
    ChatService,
    Completed,
    Failed,
    Limits,
    Submit,
    ToolEnded,
    ToolRan,
    ToolResult,
    ToolResults,
    TurnEvent,
    TurnRequest,
)
from agentskit_chat.storage import HistoryMode, MemoryStore
from tests.mcp.conftest import BOUND, stdio_server
from tests.service.test_tool_turns import Scripted
from tests.waiting import until_async

KEY = b"agent-loop-service-test-key-32by"


def calls(*made: tuple[str, str, dict[str, Any]]) -> list[ModelChunk]:
    chunks: list[ModelChunk] = []
    for index, (call_id, name, arguments) in enumerate(made):
        chunks.append(ToolCallStartChunk(index, call_id, name))
        chunks.append(ToolCallDeltaChunk(call_id, json.dumps(arguments)))
    return [*chunks, FinishChunk("tool_calls")]


def text(answer: str) -> list[ModelChunk]:
    return [TextChunk(answer), FinishChunk("stop")]


def shop(record: Path, approval: bool = False) -> ChatDefinition:
    tools: dict[str, dict[str, Any]] = {
        name: {"server": "orders"} for name in ("lookup_order", "count", "fail")
    }
    tools["count"]["approval"] = approval
    return parse_definition(
        {
            "id": "shop",
            "revision": 1,
            "model": {"adapter": "scripted"},
            "conversation": {"initial": "idle", "states": {"idle": {}}},
            "mcp_servers": {"orders": stdio_server(record)},
            "tools": tools,
        }
    )


@asynccontextmanager
async def served(
    tmp_path: Path, model: Scripted, limits: Limits | None = None, *, approval: bool = False
) -> AsyncIterator[ChatService]:
    definition = shop(tmp_path / "record.jsonl", approval)
    with (tmp_path / "stderr.txt").open("w", encoding="utf-8") as stderr:
        tools = ServerTools([definition], server_stderr=stderr)
        async with asyncio.timeout(BOUND):
            await tools.start()
        chat = ChatService(
            Catalog([definition]),
            MemoryStore(),
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


async def turn(chat: ChatService, request: TurnRequest) -> list[TurnEvent]:
    async with asyncio.timeout(BOUND):
        return [event async for event in chat.run_turn(request)]


def executions(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "record.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [json.loads(line) for line in lines]


def test_two_rounds_of_server_tools_then_the_answer(tmp_path: Path) -> None:
    model = Scripted(
        calls(("c1", "lookup_order", {"order_id": "A-17"})),
        calls(("c2", "count", {"key": "k1"}), ("c3", "count", {"key": "k2"})),
        text("Your order A-17 shipped."),
    )

    async def scenario() -> None:
        async with served(tmp_path, model) as chat:
            events = await turn(chat, TurnRequest("s1", "t1", Submit("where is A-17?")))
            ran = [e for e in events if isinstance(e, ToolRan)]
            assert [(r.call_id, r.error_type) for r in ran] == [
                ("c1", None),
                ("c2", None),
                ("c3", None),
            ]
            assert ran[0].content == "order A-17: 2 items, shipped"
            ended = [e for e in events if isinstance(e, ToolEnded)]
            assert {e.wait for e in ended} == {"server"}
            done = events[-1]
            assert isinstance(done, Completed)
            assert (done.content, done.pending, done.finish_reason) == (
                "Your order A-17 shipped.",
                (),
                "stop",
            )
            # The model was given the server tools, then each round's calls and results.
            offered = [spec.name for spec in model.requests[0].tools.tools]
            assert sorted(offered) == ["count", "fail", "lookup_order"]
            last = model.requests[2].messages
            assert [m.role for m in last[-5:]] == [
                Role.ASSISTANT,
                Role.TOOL,
                Role.ASSISTANT,
                Role.TOOL,
                Role.TOOL,
            ]
            assert last[-4].content == "order A-17: 2 items, shipped"
            history = await chat.get_session("s1")
            assert [m.role for m in history.messages] == [
                Role.USER,
                Role.ASSISTANT,
                Role.TOOL,
                Role.ASSISTANT,
                Role.TOOL,
                Role.TOOL,
                Role.ASSISTANT,
            ]
            assert history.messages[-1].id == done.assistant_message_id
            again = await turn(chat, TurnRequest("s1", "t1", Submit("where is A-17?")))
            assert isinstance(again[-1], Completed)
        assert [e["key"] for e in executions(tmp_path)] == ["k1", "k2"]  # once each
        assert [e["meta"]["agentskit.call_id"] for e in executions(tmp_path)] == ["c2", "c3"]

    asyncio.run(scenario())


def test_a_failing_tool_is_an_error_result_the_model_reads(tmp_path: Path) -> None:
    model = Scripted(calls(("c1", "fail", {"reason": "no"})), text("Sorry, that failed."))

    async def scenario() -> None:
        async with served(tmp_path, model) as chat:
            events = await turn(chat, TurnRequest("s1", "t1", Submit("break it")))
            ran = [e for e in events if isinstance(e, ToolRan)]
            assert [r.error_type for r in ran] == ["tool_error"]
            assert isinstance(events[-1], Completed)
            assert model.requests[1].messages[-1].role == Role.TOOL

    asyncio.run(scenario())


def test_past_the_rounds_a_turn_may_run_it_fails_and_stores_nothing(tmp_path: Path) -> None:
    looping = [calls((f"c{n}", "lookup_order", {"order_id": str(n)})) for n in range(3)]
    model = Scripted(*looping)

    async def scenario() -> None:
        async with served(tmp_path, model, Limits(max_tool_rounds=2)) as chat:
            events = await turn(chat, TurnRequest("s1", "t1", Submit("loop")))
            failed = events[-1]
            assert isinstance(failed, Failed)
            assert failed.code == "tool_rounds"
            assert (await chat.get_session("s1")).messages == ()

    asyncio.run(scenario())


def test_client_and_server_calls_in_one_answer(tmp_path: Path) -> None:
    mixed = calls(("c1", "lookup_order", {"order_id": "9"}), ("c2", "local_time", {}))
    model = Scripted(mixed, text("It is noon and your order shipped."))
    client = ToolOptions((ToolSpec("local_time", "The time", {"type": "object"}),))

    async def scenario() -> None:
        async with served(tmp_path, model) as chat:
            first = await turn(chat, TurnRequest("s1", "t1", Submit("time?"), tools=client))
            done = first[-1]
            assert isinstance(done, Completed)
            assert [p.call_id for p in done.pending] == ["c2"]  # the server's one ran
            assert [e.call_id for e in first if isinstance(e, ToolRan)] == ["c1"]
            result = ToolResults((ToolResult("c2", "12:00"),))
            second = await turn(chat, TurnRequest("s1", "t2", result, tools=client))
            assert isinstance(second[-1], Completed)
            sent = model.requests[1].messages
            assert [(m.role, m.tool_call_id) for m in sent[-3:]] == [
                (Role.ASSISTANT, None),
                (Role.TOOL, "c1"),
                (Role.TOOL, "c2"),
            ]

    asyncio.run(scenario())


def test_a_server_tool_needing_approval_runs_only_once_approved(tmp_path: Path) -> None:
    model = Scripted(
        calls(("c1", "count", {"key": "paid"})),
        text("Done."),
        calls(("c2", "count", {"key": "refund"})),
        text("Not refunded."),
    )

    async def scenario() -> None:
        async with served(tmp_path, model, approval=True) as chat:
            first = await turn(chat, TurnRequest("s1", "t1", Submit("pay")))
            done = first[-1]
            assert isinstance(done, Completed)
            assert [(p.call_id, p.wait) for p in done.pending] == [("c1", "approval")]
            assert executions(tmp_path) == []  # not before the approval
            approved = ToolResults(approvals=(Approval("c1", True),))
            second = await turn(chat, TurnRequest("s1", "t2", approved))
            assert [e.call_id for e in second if isinstance(e, ToolRan)] == ["c1"]
            assert isinstance(second[-1], Completed)
            assert second[-1].content == "Done."
            assert [e["key"] for e in executions(tmp_path)] == ["paid"]
            third = await turn(chat, TurnRequest("s1", "t3", Submit("refund")))
            assert isinstance(third[-1], Completed)
            denied = ToolResults(approvals=(Approval("c2", False, "no"),))
            fourth = await turn(chat, TurnRequest("s1", "t4", denied))
            assert not [e for e in fourth if isinstance(e, ToolRan)]
            assert isinstance(fourth[-1], Completed)
            assert [e["key"] for e in executions(tmp_path)] == ["paid"]  # never the denied
            assert model.requests[1].messages[-1].content == "counted paid"

    asyncio.run(scenario())


def test_a_call_in_flight_is_named_in_the_lease_and_a_lapsed_one_is_recorded_unknown(
    tmp_path: Path,
) -> None:
    """While a server tool runs, the stored lease names its call; a lease that lapsed with a
    call in it (its process died) is recorded, at the session's next write, as an
    interrupted turn whose call's outcome is unknown."""
    model = Scripted(
        calls(("c1", "slow", {"gate": "g1"})),
        text("Done."),
        text("Hello again."),
    )
    definition = parse_definition(
        {
            "id": "shop",
            "revision": 1,
            "model": {"adapter": "scripted"},
            "conversation": {"initial": "idle", "states": {"idle": {}}},
            "mcp_servers": {"orders": stdio_server(tmp_path / "record.jsonl")},
            "tools": {"slow": {"server": "orders"}, "release": {"server": "orders"}},
        }
    )

    async def scenario() -> None:
        store = MemoryStore()
        with (tmp_path / "stderr.txt").open("w", encoding="utf-8") as stderr:
            tools = ServerTools([definition], server_stderr=stderr)
            async with asyncio.timeout(BOUND):
                await tools.start()
            chat = ChatService(
                Catalog([definition]),
                store,
                digest_key=KEY,
                adapters=AdapterRegistry({"scripted": lambda options: model}),
                server_tools=tools,
            )
            try:
                await chat.create_session("shop", "s1", HistoryMode.SERVER)
                running = asyncio.ensure_future(turn(chat, TurnRequest("s1", "t1", Submit("wait"))))

                async def lease_names_the_call() -> bool:
                    lease = (await chat._records.load("s1")).record.lease
                    return lease is not None and [c.call_id for c in lease.running] == ["c1"]

                await until_async(lease_names_the_call, "the lease naming the call")
                await tools.call("release", '{"gate": "g1"}', turn_id="x", call_id="x")
                assert isinstance((await running)[-1], Completed)
                loaded = await chat._records.load("s1")
                assert loaded.record.lease is None
                # As if the process had died while the call ran: the lease lapsed with it.
                lapsed = Lease(
                    "t-dead",
                    "gone",
                    1,
                    "submit",
                    0,
                    None,
                    running=(PendingCall("c9", "slow", "server"),),
                )
                died = loaded.record.evolve(lease=lapsed, cursor=loaded.cursor + 1)
                assert await chat._records.save(loaded, died) is not None
                after = await turn(chat, TurnRequest("s1", "t2", Submit("hello")))
                assert isinstance(after[-1], Completed)
                record = (await chat._records.load("s1")).record
                dead = record.find_turn("t-dead")
                assert dead is not None
                assert (dead.outcome, dead.error_code) == ("failed", "interrupted")
                assert [c.call_id for c in dead.unknown] == ["c9"]
            finally:
                await chat.close()
                await tools.close()

    asyncio.run(scenario())
