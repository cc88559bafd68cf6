"""The price of a tool round: a plain agentic turn against a tool round the client runs,
and against a server tool round the service runs on an MCP server, over the same fake
model, through `serve` over gRPC with the Python client.

Child processes: the fake model server (`--tool-calls`: a request that offers tools is
answered with one call of each, a request ending with tool results with a sentence),
`serve` on the memory store (bench/_delegate.py), and the MCP server of
examples/mcp/orders_server.py, which `serve` starts over stdio for the `shop` chat. This
process runs, one at a time and alternating the order, a plain agentic turn (one model
call); a client tool round: a turn declaring two tools that completes waiting for their
results, then the `tool_results` turn that sends them and gets the model's answer (two
model calls, two turns); and a server tool round: one turn in which the model calls
`lookup_order`, the service runs it on the MCP server and the model answers (two model
calls, one tool call, one turn). Each is timed from the first request to the last event,
in a session created before the clock starts; the server's CPU time per round is read
from /proc around each path's calls (`serve` only: not the MCP server's, which is the
tool's own cost).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Final

from agentskit_chat_client import (
    ChatClient,
    ChatError,
    Submit,
    ToolDeclaration,
    ToolResult,
    ToolResults,
)

from . import _paired
from ._delegate import delegating
from ._paired import Column, Runs
from ._servers import ROOT, Server
from ._turns import percentile_ms

TOOLS: Final = (
    ToolDeclaration(
        "get_weather",
        "The weather in a city",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ),
    ToolDeclaration("clock", "The time here"),
)
PATHS: Final = ("plain", "tool_round", "server_round")
ORDERS_SERVER: Final = ROOT / "examples" / "mcp" / "orders_server.py"
SHOP: Final = (
    "id: shop\nrevision: 1\n"
    'model: {{adapter: openai, base_url: "{base_url}", model: {model}}}\n'
    "mcp_servers:\n"
    f"  orders: {{{{command: {sys.executable}, args: [{ORDERS_SERVER}]}}}}\n"
    "tools: {{lookup_order: {{server: orders}}}}\n"
    "conversation: {{initial: open, states: {{open: {{}}}}}}\n"
)
"""A chat whose model may call the MCP server's `lookup_order` (a template for `delegating`)."""
FULL: Final = Runs("rounds", count=200, warmup=20)
QUICK: Final = Runs("rounds", count=10, warmup=2)
COLUMNS: Final = (
    Column("p50 ms", "p50_ms", 8),
    Column("p95 ms", "p95_ms", 8),
    Column("server CPU ms/round", "server_cpu_ms_per_round", 20),
)


@dataclass(slots=True)
class Figures:
    """The timed rounds of one path and the server CPU they took."""

    path: str
    seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    cpu_seconds: float = 0.0

    def percentile_ms(self, fraction: float) -> float:
        """Nearest-rank percentile of a round's wall time, in milliseconds."""
        return percentile_ms(self.seconds, fraction)

    def summary(self) -> dict[str, Any]:
        """The figures as plain data."""
        rounds = len(self.seconds)
        return {
            "rounds": rounds,
            "failures": len(self.failures),
            "p50_ms": self.percentile_ms(0.5),
            "p95_ms": self.percentile_ms(0.95),
            "server_cpu_ms_per_round": self.cpu_seconds * 1e3 / rounds if rounds else 0.0,
        }


async def plain_turn(client: ChatClient) -> float | str:
    """One agentic turn without tools."""
    session = await client.create_session("delegate")
    start = time.perf_counter()
    result = await client.run_turn(session.session_id, Submit("Hello"))
    if not result.ok or result.pending_tool_calls:
        return "plain: the turn did not complete with an answer"
    return time.perf_counter() - start


async def tool_round(client: ChatClient) -> float | str:
    """The model calls both tools, the client answers them, the model answers."""
    session = await client.create_session("delegate")
    start = time.perf_counter()
    asked = await client.run_turn(session.session_id, Submit("Weather?"), tools=TOOLS)
    pending = asked.pending_tool_calls
    if len(pending) != len(TOOLS):
        return f"tool_round: {len(pending)} pending calls"
    results = ToolResults([ToolResult(call.tool_call_id, "sunny") for call in pending])
    answered = await client.run_turn(session.session_id, results, tools=TOOLS)
    if not answered.ok or not answered.text:
        return "tool_round: the results got no answer"
    return time.perf_counter() - start


async def server_round(client: ChatClient) -> float | str:
    """The model calls a server tool, the service runs it, the model answers: one turn."""
    session = await client.create_session("shop")
    start = time.perf_counter()
    answered = await client.run_turn(session.session_id, Submit("Where is my order?"))
    if not answered.ok or answered.pending_tool_calls or not answered.text:
        return "server_round: the turn did not complete with an answer"
    if "1 tool result" not in answered.text:
        return "server_round: the model did not get the tool's result"
    return time.perf_counter() - start


async def measure(runs: Runs) -> dict[str, Figures]:
    """Start the fake model and `serve`, then run both paths alternately."""
    figures = {path: Figures(path) for path in PATHS}
    async with AsyncExitStack() as stack:
        shop = {"shop.yaml": SHOP}
        service = (
            await delegating(stack, "tools-bench-", ["--tool-calls"], definitions=shop)
        ).service
        chat = await stack.enter_async_context(ChatClient(service.address, timeout=30))
        rounds: Mapping[str, Callable[[ChatClient], Awaitable[float | str]]] = {
            "plain": plain_turn,
            "tool_round": tool_round,
            "server_round": server_round,
        }
        for path, timed in _paired.alternating(PATHS, runs):
            before = _cpu(service)
            try:
                outcome = await rounds[path](chat)
            except ChatError as exc:
                outcome = f"{path}: {exc.reason or exc.code}"
            if not timed:
                continue
            figures[path].cpu_seconds += _cpu(service) - before
            if isinstance(outcome, str):
                figures[path].failures.append(outcome)
            else:
                figures[path].seconds.append(outcome)
    return figures


def _cpu(server: Server) -> float:
    return server.cpu_seconds() or 0.0


def report(figures: Mapping[str, Figures], runs: Runs, quick: bool) -> dict[str, Any]:
    """Print the table and the ratios; the figures as plain data."""
    data = {path: f.summary() for path, f in figures.items()}
    print(
        f"\nA client tool round (2 turns, 2 model calls) and a server tool round (1 turn, 2"
        f" model calls, 1 MCP call) against a plain agentic turn (1 model call), fake model,"
        f" serve on the memory store; {runs.count} rounds per path ({_paired.machine()})"
    )
    _paired.table("path", 13, COLUMNS, data)
    note = _paired.QUICK_NOTE if quick else ""
    found: dict[str, Any] = {"config": runs.data(), "paths": data}
    for path, label, floor in (
        ("tool_round", "Tool round", "two turns and two model calls make 2x the floor"),
        ("server_round", "Server tool round", "two model calls make 2x the floor"),
    ):
        ratios = _over(data[path], data["plain"])
        print(
            f"{label} / plain turn{note}: p50 {ratios['p50']:.2f}x, server CPU "
            f"{ratios['server_cpu']:.2f}x ({floor})"
        )
        found[f"{path}_over_plain"] = ratios
    return found


def _over(path: Mapping[str, Any], plain: Mapping[str, Any]) -> dict[str, float]:
    cpu = plain["server_cpu_ms_per_round"]
    return {
        "p50": path["p50_ms"] / plain["p50_ms"] if plain["p50_ms"] else 0.0,
        "server_cpu": path["server_cpu_ms_per_round"] / cpu if cpu else 0.0,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table; 1 when any round failed, else 0."""
    return _paired.main(argv, __doc__, FULL, QUICK, measure, report)


if __name__ == "__main__":
    raise SystemExit(main())
