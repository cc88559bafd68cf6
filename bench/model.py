"""Model delegation: an agentic turn through the service against a direct streaming call.

Two child processes: the fake model server (CHUNKS chunks, DELAY seconds before each) and
`serve` with the memory store and a definition whose `openai` adapter points at it
(bench/_delegate.py). This process calls the fake model both ways, one call at a time,
alternating which path goes first: directly over HTTP (httpx, keep-alive, the same request
body the adapter sends), and as a whole agentic turn through the gRPC service with the
Python client. Time to first chunk is measured from the start of the call to the first
text; chunk throughput is the chunks after the first over the time from the first to the
last.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, aclosing
from dataclasses import dataclass, field
from typing import Any, Final

import httpx

from agentskit_chat_client import ChatClient, ChatError, TextDelta, TurnCompleted

from . import _paired
from ._delegate import MODEL, delegating
from ._paired import Column, Runs
from ._turns import percentile_ms

CHUNKS: Final = 20
DELAY: Final = 0.001
MODEL_OPTIONS: Final = ("--chunks", str(CHUNKS), "--delay", str(DELAY))
"""The fake model's options: CHUNKS chunks, DELAY seconds before each."""
PROMPT: Final = "Hello"
PATHS: Final = ("direct", "service")
TTFC_GOAL_MS: Final = 2.0
TTFC_GOAL_RATIO: Final = 1.2
THROUGHPUT_GOAL: Final = 0.9
FULL: Final = Runs("calls", count=300, warmup=30)
QUICK: Final = Runs("calls", count=20, warmup=5)
COLUMNS: Final = (
    Column("TTFC p50 ms", "ttfc_p50_ms", 12),
    Column("TTFC p99 ms", "ttfc_p99_ms", 12),
    Column("chunks/s", "chunks_per_s", 10, ",.0f"),
)


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
        return percentile_ms([call.first for call in self.calls], fraction)

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


async def measure(runs: Runs) -> dict[str, Figures]:
    """Start the fake model and the service, then call both paths alternately."""
    figures = {path: Figures(path) for path in PATHS}
    async with AsyncExitStack() as stack:
        delegation = await delegating(stack, "model-bench-", MODEL_OPTIONS)
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
        chat = await stack.enter_async_context(ChatClient(delegation.service.address, timeout=30))
        url = f"{delegation.base_url}/chat/completions"
        calls: Mapping[str, Callable[[], Awaitable[Call | str]]] = {
            "direct": lambda: direct_call(http, url),
            "service": lambda: service_call(chat),
        }
        for path, timed in _paired.alternating(PATHS, runs):
            try:
                outcome = await calls[path]()
            except (httpx.HTTPError, ChatError) as exc:
                outcome = f"{path}: {type(exc).__name__}"
            if timed:
                figures[path].keep(outcome)
    return figures


def report(figures: Mapping[str, Figures], runs: Runs, quick: bool) -> dict[str, Any]:
    """Print the table and the goal line; the figures as plain data."""
    data = {path: f.summary() for path, f in figures.items() if f.calls}
    print(
        f"\nModel delegation: {CHUNKS} chunks, {DELAY * 1e3:g} ms before each, from the fake "
        f"model server; {runs.count} calls per path, one at a time "
        f"({_paired.machine(f'httpx {httpx.__version__}')})"
    )
    _paired.table("path", 8, COLUMNS, data)
    if len(data) < len(PATHS):
        print("Goals: not measured (a path has no successful call)")
        return {"config": runs.data(), "paths": data, "goals_met": False}
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
    note = _paired.QUICK_NOTE if quick else ""
    print(
        f"Goals{note}: added TTFC p50 {added:.2f} ms, {ratio:.2f}x direct "
        f"(goal <= {TTFC_GOAL_MS:g} ms or <= {TTFC_GOAL_RATIO}x): "
        f"{'met' if ttfc_met else 'MISSED'}; chunk throughput {throughput:.2f}x direct "
        f"(goal >= {THROUGHPUT_GOAL}x): {'met' if throughput_met else 'MISSED'}"
    )
    return {
        "config": runs.data(),
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
    return _paired.main(argv, __doc__, FULL, QUICK, measure, report)


if __name__ == "__main__":
    raise SystemExit(main())
