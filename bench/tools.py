"""The price of a tool round: a plain agentic turn against a tool round, over the same fake
model, through `serve` over gRPC with the Python client.

Two child processes: the fake model server (`--tool-calls`: a request that declares tools
is answered with one call of each, a request ending with tool results with a sentence) and
`serve` on the memory store. This process runs, one at a time and alternating which goes
first, a plain agentic turn (one model call) and a tool round: a turn declaring two tools
that completes waiting for their results, then the `tool_results` turn that sends them and
gets the model's answer (two model calls, two turns). Each is timed from the first request
to the last event, in a session created before the clock starts; the server's CPU time per
round is read from /proc around each path's calls.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from agentskit_chat_client import (
    ChatClient,
    ChatError,
    Submit,
    ToolDeclaration,
    ToolResult,
    ToolResults,
)

from . import _cli
from ._servers import Server, running

ROOT: Final = Path(__file__).resolve().parents[1]
MODEL: Final = "bench-model"
DEFINITION: Final = """\
id: delegate
revision: 1
description: Every message goes to the model; used by bench/tools.py.
model: {{adapter: openai, base_url: "{base_url}", model: {model}}}
conversation:
  initial: chatting
  states: {{chatting: {{}}}}
"""
TOOLS: Final = (
    ToolDeclaration(
        "get_weather",
        "The weather in a city",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ),
    ToolDeclaration("clock", "The time here"),
)
PATHS: Final = ("plain", "tool_round")


@dataclass(frozen=True, slots=True)
class Config:
    """Measured rounds per path, and the untimed warm-up rounds before them."""

    rounds: int
    warmup: int


FULL = Config(rounds=200, warmup=20)
QUICK = Config(rounds=10, warmup=2)


@dataclass(slots=True)
class Figures:
    """The timed rounds of one path and the server CPU they took."""

    path: str
    seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    cpu_seconds: float = 0.0

    def percentile_ms(self, fraction: float) -> float:
        """Nearest-rank percentile of a round's wall time, in milliseconds."""
        ordered = sorted(self.seconds)
        return ordered[max(math.ceil(fraction * len(ordered)) - 1, 0)] * 1e3

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


async def measure(config: Config) -> dict[str, Figures]:
    """Start the fake model and `serve`, then run both paths alternately."""
    figures = {path: Figures(path) for path in PATHS}
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSKIT_CHAT_")}
    async with AsyncExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tools-bench-")))
        fake = [sys.executable, "-m", "agentskit_chat.fakemodel", "--listen", "127.0.0.1:0"]
        fake += ["--tool-calls"]
        model = await stack.enter_async_context(running("fake model", fake, cwd=ROOT, env=env))
        definitions = work / "definitions"
        definitions.mkdir()
        (definitions / "delegate.yaml").write_text(
            DEFINITION.format(base_url=f"{model.address}/v1", model=MODEL), encoding="utf-8"
        )
        serve = [sys.executable, "-m", "agentskit_chat.cli", "serve"]
        serve += ["--listen", "127.0.0.1:0", "--definitions", str(definitions)]
        serve += ["--store", "memory://", "--state-dir", str(work), "--drain-delay", "0"]
        service = await stack.enter_async_context(running("memory", serve, cwd=ROOT, env=env))
        chat = await stack.enter_async_context(ChatClient(service.address, timeout=30))
        runs = {"plain": plain_turn, "tool_round": tool_round}
        for index in range(config.warmup + config.rounds):
            order = PATHS if index % 2 else PATHS[::-1]
            for path in order:
                before = _cpu(service)
                try:
                    outcome = await runs[path](chat)
                except ChatError as exc:
                    outcome = f"{path}: {exc.reason or exc.code}"
                if index < config.warmup:
                    continue
                figures[path].cpu_seconds += _cpu(service) - before
                if isinstance(outcome, str):
                    figures[path].failures.append(outcome)
                else:
                    figures[path].seconds.append(outcome)
    return figures


def _cpu(server: Server) -> float:
    return server.cpu_seconds() or 0.0


def report(figures: dict[str, Figures], config: Config, *, quick: bool) -> dict[str, Any]:
    """Print the table and the ratios; the figures as plain data."""
    data = {path: f.summary() for path, f in figures.items()}
    print(
        f"\nA tool round (2 turns, 2 model calls) against a plain agentic turn (1 model call),"
        f" fake model, serve on the memory store; {config.rounds} rounds per path "
        f"({os.cpu_count()} CPUs, Python {platform.python_version()})"
    )
    print(f"  {'path':<11} {'p50 ms':>8} {'p95 ms':>8} {'server CPU ms/round':>20}")
    for path, row in data.items():
        print(
            f"  {path:<11} {row['p50_ms']:>8.2f} {row['p95_ms']:>8.2f}"
            f" {row['server_cpu_ms_per_round']:>20.2f}"
        )
    plain, tools = data["plain"], data["tool_round"]
    ratios = {
        "p50": tools["p50_ms"] / plain["p50_ms"] if plain["p50_ms"] else 0.0,
        "server_cpu": (
            tools["server_cpu_ms_per_round"] / plain["server_cpu_ms_per_round"]
            if plain["server_cpu_ms_per_round"]
            else 0.0
        ),
    }
    note = " (--quick: too few samples to trust)" if quick else ""
    print(
        f"Tool round / plain turn{note}: p50 {ratios['p50']:.2f}x, server CPU "
        f"{ratios['server_cpu']:.2f}x (two turns and two model calls make 2x the floor)"
    )
    return {"config": asdict(config), "paths": data, "tool_round_over_plain": ratios}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table; 1 when any round failed, else 0."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few rounds (smoke run)")
    parser.add_argument("--rounds", type=int, help=f"measured rounds per path [{FULL.rounds}]")
    _cli.add_output_options(parser, unpinned=None)
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    config = Config(rounds=args.rounds or base.rounds, warmup=base.warmup)
    figures = asyncio.run(measure(config))
    data = report(figures, config, quick=args.quick)
    failures = [problem for f in figures.values() for problem in f.failures]
    return _cli.finish(data, args.json, *_cli.first_of(failures), "rounds")


if __name__ == "__main__":
    raise SystemExit(main())
