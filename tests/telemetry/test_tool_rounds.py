"""One turn's span tree with two server tool rounds: the turn span holds a chat span per
model call and an execute_tool span per tool call, in order; no argument or result."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan

from agentskit_chat.mcp import ServerTools
from agentskit_chat.models import AdapterRegistry
from agentskit_chat.service import Catalog, ChatService, Submit, TurnRequest
from agentskit_chat.storage import HistoryMode, MemoryStore
from agentskit_chat.telemetry import ToolTelemetry
from tests.mcp.conftest import BOUND
from tests.service.test_agent_loop import KEY, calls, shop, text
from tests.service.test_tool_turns import Scripted

from .conftest import InMemory

CANARY = "canary-71ac"


def tree(spans: tuple[ReadableSpan, ...]) -> list[str]:
    """Each span as `depth * '  ' + name`, children after their parent, by start time."""
    ids = {span.context.span_id for span in spans}
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        children = [
            s
            for s in spans
            if (s.parent.span_id if s.parent and s.parent.span_id in ids else None) == parent
        ]
        for span in sorted(children, key=lambda s: s.start_time or 0):
            lines.append("  " * depth + span.name)
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


def test_a_turn_with_two_tool_rounds_is_one_tree(tmp_path: Path, in_memory: InMemory) -> None:
    model = Scripted(
        calls(("c1", "lookup_order", {"order_id": CANARY})),
        calls(("c2", "count", {"key": "k1"}), ("c3", "lookup_order", {"order_id": "B-2"})),
        text("Both found."),
    )
    definition = shop(tmp_path / "record.jsonl")

    async def scenario() -> None:
        tool_observer = ToolTelemetry(in_memory.tracer_provider, in_memory.meter_provider)
        with (tmp_path / "stderr.txt").open("w", encoding="utf-8") as stderr:
            tools = ServerTools([definition], server_stderr=stderr, observer=tool_observer)
            async with asyncio.timeout(BOUND):
                await tools.start()
            chat = ChatService(
                Catalog([definition]),
                MemoryStore(),
                digest_key=KEY,
                adapters=AdapterRegistry({"scripted": lambda options: model}),
                observer=in_memory.observer,
                server_tools=tools,
            )
            try:
                await chat.create_session("shop", "s1", HistoryMode.SERVER)
                request = TurnRequest("s1", "t1", Submit(f"where is {CANARY}?"))
                async with asyncio.timeout(BOUND):
                    [event async for event in chat.run_turn(request)]
            finally:
                await chat.close()
                await tools.close()

    asyncio.run(scenario())
    spans = in_memory.spans.get_finished_spans()
    turn = [line for line in tree(spans) if not line.startswith("  ")]

    assert len(turn) == 1, tree(spans)
    assert tree(spans)[1:] == [
        "  chat",
        "  execute_tool lookup_order",
        "  chat",
        "  execute_tool count",
        "  execute_tool lookup_order",
        "  chat",
    ]
    data = in_memory.reader.get_metrics_data()
    assert data is not None
    counts = {
        metric.name: sum(point.count for point in metric.data.data_points)  # type: ignore[union-attr,misc]
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name in ("gen_ai.client.operation.duration", "agentskit.chat.tool.duration")
    }
    assert counts == {"gen_ai.client.operation.duration": 3, "agentskit.chat.tool.duration": 3}
    for span in spans:
        text_of = json.dumps({"n": span.name, "a": dict(span.attributes or {})}, default=str)
        assert CANARY not in text_of, span.name
