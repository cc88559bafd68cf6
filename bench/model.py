"""Model delegation: an agentic turn through the service against a direct streaming call.

Two child processes: the fake model server (CHUNKS chunks, DELAY seconds before each) and
`serve` with the memory store and a definition whose `openai` adapter points at it. This
process calls the fake model both ways, one call at a time, alternating which path goes
first: directly over HTTP (httpx, keep-alive, the same request body the adapter sends),
and as a whole agentic turn through the gRPC service with the Python client. Time to first
chunk is measured from the start of the call to the first text; chunk throughput is the
chunks after the first over the time from the first to the last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack, aclosing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

from agentskit_chat_client import ChatClient, ChatError, TextDelta, TurnCompleted

from . import _cli
from ._servers import running

ROOT: Final = Path(__file__).resolve().parents[1]
CHUNKS: Final = 20
DELAY: Final = 0.001
MODEL: Final = "bench-model"
PROMPT: Final = "Hello"
DEFINITION: Final = """\
id: delegate
revision: 1
description: Every message goes to the model; used by bench/model.py.
model: {{adapter: openai, base_url: "{base_url}", model: {model}}}
conversation:
  initial: chatting
  states: {{chatting: {{}}}}
"""
PATHS: Final = ("direct", "service")
TTFC_GOAL_MS: Final = 2.0
TTFC_GOAL_RATIO: Final = 1.2
THROUGHPUT_GOAL: Final = 0.9


@dataclass(frozen=True, slots=True)
class Config:
    """Measured calls per path, and the untimed warm-up calls before them."""

    calls: int
    warmup: int


FULL = Config(calls=300, warmup=30)
QUICK = Config(calls=20, warmup=5)


@dataclass(frozen=True, slots=True)
class Call:
    """One streamed call: seconds to the first chunk, to the last one, and the chunk count."""

    first: float
    last: float
    chunks: int

    @property
    def chunks_per_s(self) -> float:
        """Chunks after the first over the time they took."""
        return (self.chunks - 1) / (self.last - self.first) if self.last > self.first else 0.0


@dataclass(slots=True)
class Figures:
    """Every call of one path."""

    path: str
    calls: list[Call] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def keep(self, outcome: Call | str) -> None:
        """Count a call, or what went wrong with it."""
        if isinstance(outcome, str):
            self.failures.append(outcome)
        else:
            self.calls.append(outcome)

    def ttfc_ms(self, fraction: float) -> float:
        """Nearest-rank percentile of the time to first chunk, in milliseconds."""
        ordered = sorted(call.first for call in self.calls)
        return ordered[max(math.ceil(fraction * len(ordered)) - 1, 0)] * 1e3

    @property
    def chunks_per_s(self) -> float:
        """Median chunk throughput of a call."""
        return statistics.median(call.chunks_per_s for call in self.calls)

    def summary(self) -> dict[str, Any]:
        """The figures as plain data."""
        return {
            "calls": len(self.calls),
            "failures": len(self.failures),
            "ttfc_p50_ms": self.ttfc_ms(0.5),
            "ttfc_p99_ms": self.ttfc_ms(0.99),
            "chunks_per_s": self.chunks_per_s,
        }


def request_body() -> dict[str, Any]:
    """What the `openai` adapter sends for a one-message history without optional settings."""
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPT}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def direct_call(client: httpx.AsyncClient, url: str) -> Call | str:
    """One streamed Chat Completions call, parsed as a client would."""
    return await streamed_call(client, url, request_body(), "direct")


async def streamed_call(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    label: str,
    headers: dict[str, str] | None = None,
) -> Call | str:
    """One streamed Chat Completions call, parsed as a client would; what went wrong
    (named by `label`) unless it streamed CHUNKS content chunks."""
    clock = time.perf_counter
    start = clock()
    first = last = 0.0
    chunks = 0
    async with client.stream("POST", url, json=body, headers=headers) as response:
        if response.status_code != 200:
            return f"{label}: status {response.status_code}"
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line[len("data: ") :]
            if data == "[DONE]":
                break
            choices = json.loads(data).get("choices") or []
            if choices and choices[0]["delta"].get("content"):
                last = clock()
                first = first or last
                chunks += 1
    if chunks != CHUNKS:
        return f"{label}: {chunks} chunks"
    return Call(first - start, last - start, chunks)


async def service_call(client: ChatClient) -> Call | str:
    """One agentic turn in a fresh session (created before the clock starts)."""
    session = await client.create_session("delegate")
    clock = time.perf_counter
    start = clock()
    first = last = 0.0
    chunks = 0
    completed = False
    async with aclosing(client.submit(session.session_id, PROMPT)) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                last = clock()
                first = first or last
                chunks += 1
            completed = completed or isinstance(event, TurnCompleted)
    if not completed or chunks != CHUNKS:
        return f"service: {chunks} chunks, completed {completed}"
    return Call(first - start, last - start, chunks)


async def fake_model(stack: AsyncExitStack, work: Path, env: Mapping[str, str]) -> tuple[str, Path]:
    """Start the fake model (stopped with `stack`) and write, in a definitions folder under
    `work`, the `delegate` definition that sends every message to it: (its base URL, the
    folder)."""
    fake = [sys.executable, "-m", "agentskit_chat.fakemodel", "--listen", "127.0.0.1:0"]
    fake += ["--chunks", str(CHUNKS), "--delay", str(DELAY)]
    model = await stack.enter_async_context(running("fake model", fake, cwd=ROOT, env=env))
    base_url = f"{model.address}/v1"
    definitions = work / "definitions"
    definitions.mkdir()
    (definitions / "delegate.yaml").write_text(
        DEFINITION.format(base_url=base_url, model=MODEL), encoding="utf-8"
    )
    return base_url, definitions


async def measure(config: Config) -> dict[str, Figures]:
    """Start the fake model and the service, then call both paths alternately."""
    figures = {path: Figures(path) for path in PATHS}
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSKIT_CHAT_")}
    async with AsyncExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="model-bench-")))
        base_url, definitions = await fake_model(stack, work, env)
        serve = [sys.executable, "-m", "agentskit_chat.cli", "serve"]
        serve += ["--listen", "127.0.0.1:0", "--definitions", str(definitions)]
        serve += ["--store", "memory://", "--state-dir", str(work), "--drain-delay", "0"]
        service = await stack.enter_async_context(running("memory", serve, cwd=ROOT, env=env))
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
        chat = await stack.enter_async_context(ChatClient(service.address, timeout=30))
        url = f"{base_url}/chat/completions"
        for index in range(config.warmup + config.calls):
            calls = [("direct", direct_call(http, url)), ("service", service_call(chat))]
            for path, pending in calls if index % 2 else calls[::-1]:
                try:
                    outcome = await pending
                except (httpx.HTTPError, ChatError) as exc:
                    outcome = f"{path}: {type(exc).__name__}"
                if index >= config.warmup:
                    figures[path].keep(outcome)
    return figures


def report(figures: dict[str, Figures], config: Config, *, quick: bool) -> dict[str, Any]:
    """Print the table and the goal line; the figures as plain data."""
    data = {path: f.summary() for path, f in figures.items() if f.calls}
    print(
        f"\nModel delegation: {CHUNKS} chunks, {DELAY * 1e3:g} ms before each, from the fake "
        f"model server; {config.calls} calls per path, one at a time "
        f"({os.cpu_count()} CPUs, Python {platform.python_version()}, httpx {httpx.__version__})"
    )
    print(f"  {'path':<8} {'TTFC p50 ms':>12} {'TTFC p99 ms':>12} {'chunks/s':>10}")
    for path, row in data.items():
        print(
            f"  {path:<8} {row['ttfc_p50_ms']:>12.2f} {row['ttfc_p99_ms']:>12.2f}"
            f" {row['chunks_per_s']:>10,.0f}"
        )
    if len(data) < len(PATHS):
        print("Goals: not measured (a path has no successful call)")
        return {"config": asdict(config), "paths": data, "goals_met": False}
    direct, service = data["direct"], data["service"]
    added = service["ttfc_p50_ms"] - direct["ttfc_p50_ms"]
    ratio = service["ttfc_p50_ms"] / direct["ttfc_p50_ms"]
    throughput = service["chunks_per_s"] / direct["chunks_per_s"]
    ttfc_met = added <= TTFC_GOAL_MS or ratio <= TTFC_GOAL_RATIO
    throughput_met = throughput >= THROUGHPUT_GOAL
    print(
        "  TTFC: start of the call to the first text; chunks/s: median per call, "
        "chunks after the first over the time from the first to the last"
    )
    note = " (--quick: too few samples to trust)" if quick else ""
    print(
        f"Goals{note}: added TTFC p50 {added:.2f} ms, {ratio:.2f}x direct "
        f"(goal <= {TTFC_GOAL_MS:g} ms or <= {TTFC_GOAL_RATIO}x): "
        f"{'met' if ttfc_met else 'MISSED'}; chunk throughput {throughput:.2f}x direct "
        f"(goal >= {THROUGHPUT_GOAL}x): {'met' if throughput_met else 'MISSED'}"
    )
    return {
        "config": asdict(config),
        "chunks": CHUNKS,
        "delay_s": DELAY,
        "paths": data,
        "added_ttfc_p50_ms": added,
        "ttfc_p50_ratio": ratio,
        "throughput_ratio": throughput,
        "goals_met": ttfc_met and throughput_met,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table; 1 when any call failed, else 0."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few calls (smoke run)")
    parser.add_argument("--calls", type=int, help=f"measured calls per path [{FULL.calls}]")
    _cli.add_output_options(parser, unpinned=None)
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    config = Config(calls=args.calls or base.calls, warmup=base.warmup)
    figures = asyncio.run(measure(config))
    data = report(figures, config, quick=args.quick)
    failures = [problem for f in figures.values() for problem in f.failures]
    return _cli.finish(data, args.json, *_cli.first_of(failures), "calls")


if __name__ == "__main__":
    raise SystemExit(main())
