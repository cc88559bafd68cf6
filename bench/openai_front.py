"""The OpenAI-compatible front: its server CPU per turn against the same server's gRPC
turns, and the time to first chunk of an agentic turn through it against a direct call to
the model.

CPU: one `serve` (memory store, the `ping` definition, an HTTP listener) pinned to a CPU of
its own when there are two or more; each round measures, one after the other in a rotated
order, deterministic `/ping` turns over gRPC (bench/service.py's workers: server-held
sessions, submit) and over `POST /v1/chat/completions` (httpx, HTTP/1.1, one connection per
client, not streamed) in its three modes: `session` (a session header: the same submit),
`conversation` (a client-held conversation: the whole history dispatched, growing to
TURNS_PER_SESSION turns) and `stateless` (no header: a session made and deleted per turn).
The ratio is the server CPU per turn of each mode over that of the gRPC turns of the same
round; the table gives the median round. The load generator is pure Python (httpx), so the
server CPU per turn is the figure to compare, not the throughput.

TTFC: the fake model server (bench/model.py's CHUNKS and DELAY) and `serve` over a
definition delegating everything to it; one call at a time, alternating which goes first:
a direct streamed call to the fake model (bench/model.py's `direct_call`), and a streamed
chat completion through the front, stateless (the default of any OpenAI client) and in a
client-held conversation (its first turn, the session made before the clock starts).

    .venv/bin/python -m bench.openai_front            # 5 rounds, 300 TTFC calls per path
    .venv/bin/python -m bench.openai_front --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import grpc
import httpx

from . import _cli, _connect
from . import _turns as turns
from . import model as model_bench
from . import service as service_bench
from ._delegate import delegating
from ._servers import Server, bench_env, placed, running

ROOT: Final = Path(__file__).resolve().parents[1]
MODES: Final = ("session", "conversation", "stateless")
TARGETS: Final = ("grpc", *MODES)
CPU_GOAL: Final = 1.3
TTFC_GOAL_MS: Final = 2.0
TTFC_PATHS: Final = ("direct", "stateless", "conversation")
COMPLETIONS: Final = "/v1/chat/completions"


@dataclass(frozen=True, slots=True)
class Config(turns.Load):
    """Clients, rounds and seconds per CPU target; calls per TTFC path."""

    calls: int
    warmup_calls: int
    min_calls: int = 0
    """A CPU phase goes on (within MAX_SECONDS) until it has this many turns: CPU time is
    read in clock ticks (10 ms), so a short phase of a slow target would say little."""


FULL = Config(
    clients=8, rounds=5, seconds=2.0, warmup=0.5, calls=300, warmup_calls=30, min_calls=1000
)
QUICK = Config(clients=4, rounds=1, seconds=0.3, warmup=0.1, calls=10, warmup_calls=3)
MAX_SECONDS: Final = 30.0


class FrontWorker:
    """`/ping` turns through the OpenAI front in one `mode`, on a connection of its own."""

    def __init__(self, client: httpx.AsyncClient, mode: str, tag: str) -> None:
        self.client = client
        self.mode = mode
        self.tag = tag
        self.serial = 0
        self.turns = 0
        self.headers: dict[str, str] = {}
        self.history: list[dict[str, str]] = []
        self.spare: list[str] = []

    async def _session(self) -> str:
        reply = await self.client.post(
            f"{service_bench.SERVICE_PATH}/CreateSession",
            json={"definitionId": turns.DEFINITION_ID},
        )
        reply.raise_for_status()
        return str(reply.json()["session"]["sessionId"])

    async def prepare(self, calls: int) -> None:
        """Server-held sessions for `calls` turns (session mode); a fresh start."""
        if self.mode == "session":
            needed = calls // turns.TURNS_PER_SESSION + 2
            self.spare.extend([await self._session() for _ in range(needed - len(self.spare))])
        self.turns = turns.TURNS_PER_SESSION

    async def next(self) -> None:
        """A fresh session or conversation when the current one is full."""
        if self.turns < turns.TURNS_PER_SESSION:
            return
        self.turns, self.history = 0, []
        if self.mode == "session":
            session = self.spare.pop() if self.spare else await self._session()
            self.headers = {"X-AgentsKit-Session": session}
        elif self.mode == "conversation":
            self.serial += 1
            self.headers = {"X-AgentsKit-Conversation": f"{self.tag}-{self.serial}"}

    async def call(self) -> str | None:
        """One turn; None when it answered `pong`."""
        self.turns += 1
        self.history.append({"role": "user", "content": turns.TURN_TEXT})
        body = {"model": turns.DEFINITION_ID, "messages": self.history}
        try:
            reply = await self.client.post(COMPLETIONS, json=body, headers=self.headers)
        except httpx.HTTPError as exc:
            return f"{self.mode}: {type(exc).__name__}"
        if reply.status_code != 200:
            return f"{self.mode}: status {reply.status_code} {reply.text[:200]}"
        answer = reply.json()["choices"][0]["message"]["content"]
        if answer != turns.TURN_ANSWER:
            return f"{self.mode}: unexpected answer"
        self.history.append({"role": "assistant", "content": answer})
        if self.mode != "conversation":
            self.history = []
        return None


async def _cpu_round(server: Server, target: str, config: Config) -> turns.Phase:
    async with AsyncExitStack() as stack:
        workers: list[turns.Worker] = []
        for index in range(config.clients):
            if target == "grpc":
                channel = grpc.aio.insecure_channel(server.address, options=turns.OWN_CONNECTION)
                await stack.enter_async_context(channel)
                workers.append(turns.ChatWorker(channel, f"g{index}"))
                continue
            client = await _connect.own_client(stack, server.http_address)
            workers.append(FrontWorker(client, target, f"{target[0]}{index}-{time.time_ns()}"))
        warm = await turns.measure(workers, server.cpu_seconds, config.warmup)
        if warm.failures:
            return warm
        total: turns.Phase | None = None
        while total is None or (total.calls < config.min_calls and total.elapsed < MAX_SECONDS):
            expected = max(warm.calls / warm.elapsed * config.seconds / config.clients, 1.0)
            await asyncio.gather(*(w.prepare(int(expected * 1.5) + 10) for w in workers))
            phase = await turns.measure(workers, server.cpu_seconds, config.seconds)
            total = phase if total is None else _sum(total, phase)
        return total


def _sum(one: turns.Phase, other: turns.Phase) -> turns.Phase:
    """Two phases of one target as one."""
    cpu = None
    if one.server_cpu is not None and other.server_cpu is not None:
        cpu = one.server_cpu + other.server_cpu
    return turns.Phase(
        one.calls + other.calls,
        one.elapsed + other.elapsed,
        one.latencies + other.latencies,
        one.failures + other.failures,
        cpu,
        one.client_cpu + other.client_cpu,
    )


async def measure_cpu(config: Config, env: dict[str, str]) -> tuple[dict[str, list[Any]], bool]:
    """Per round and target: (server CPU seconds per turn, turns per second, failures)."""
    rounds: dict[str, list[Any]] = {target: [] for target in TARGETS}
    async with AsyncExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="openai-bench-")))
        server_cpus, _ = placed(stack)
        serve = [sys.executable, "-m", "agentskit_chat.cli", "serve", "--listen", "127.0.0.1:0"]
        serve += ["--definitions", str(turns.DEFINITIONS), "--drain-delay", "0"]
        serve += ["--store", "memory://", "--state-dir", str(work), "--http-listen", "127.0.0.1:0"]
        server = await stack.enter_async_context(
            running("serve", serve, cwd=ROOT, env=env, cpus=server_cpus)
        )
        for number in range(config.rounds):
            order = TARGETS[number % len(TARGETS) :] + TARGETS[: number % len(TARGETS)]
            for target in order:
                phase = await _cpu_round(server, target, config)
                cpu = None if phase.server_cpu is None else phase.server_cpu / max(phase.calls, 1)
                rounds[target].append((cpu, phase.calls / phase.elapsed, phase.failures))
    return rounds, server_cpus is not None


async def front_call(client: httpx.AsyncClient, headers: dict[str, str]) -> model_bench.Call | str:
    """One streamed agentic chat completion through the front, parsed as a client would."""
    body = {
        "model": "delegate",
        "messages": [{"role": "user", "content": model_bench.PROMPT}],
        "stream": True,
    }
    return await model_bench.streamed_call(client, COMPLETIONS, body, "front", headers)


async def measure_ttfc(config: Config, env: dict[str, str]) -> dict[str, model_bench.Figures]:
    """Direct calls and front calls, one at a time, alternating which goes first."""
    figures = {path: model_bench.Figures(path) for path in TTFC_PATHS}
    async with AsyncExitStack() as stack:
        delegation = await delegating(
            stack, "openai-ttfc-", model_bench.MODEL_OPTIONS, env=env, http=True
        )
        service = delegation.service
        direct = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
        front = await stack.enter_async_context(
            httpx.AsyncClient(base_url=f"http://{service.http_address}", timeout=30)
        )
        url = f"{delegation.base_url}/chat/completions"
        for index in range(config.warmup_calls + config.calls):
            await front.post(  # the conversation exists before the clock starts
                "/agentskit.chat.v1.ChatService/CreateSession",
                json={"definitionId": "delegate", "sessionId": f"c{index}", "historyMode": 2},
            )
            calls = [
                ("direct", model_bench.direct_call(direct, url)),
                ("stateless", front_call(front, {})),
                ("conversation", front_call(front, {"X-AgentsKit-Conversation": f"c{index}"})),
            ]
            shift = index % len(calls)
            for path, pending in calls[shift:] + calls[:shift]:
                try:
                    outcome = await pending
                except httpx.HTTPError as exc:
                    outcome = f"{path}: {type(exc).__name__}"
                if index >= config.warmup_calls:
                    figures[path].keep(outcome)
    return figures


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}" if values else "-"


def report(
    rounds: dict[str, list[Any]], pinned: bool, ttfc: dict[str, model_bench.Figures]
) -> dict[str, Any]:
    """Print both tables with the goals; the figures as plain data."""
    print(
        f"\nOpenAI front, server CPU per deterministic turn ({len(rounds['grpc'])} rounds, "
        f"{os.cpu_count()} CPUs{', server pinned' if pinned else ''}, "
        f"Python {platform.python_version()})"
    )
    print(f"  {'target':<13} {'CPU us/turn':>12} {'turns/s':>9} {'x gRPC (median, range)':>24}")
    data: dict[str, Any] = {"cpu": {}, "ttfc": {}}
    for target in TARGETS:
        rows = rounds[target]
        cpus = [row[0] for row in rows if row[0] is not None]
        ratios = [
            row[0] / base[0]
            for row, base in zip(rows, rounds["grpc"], strict=True)
            if row[0] is not None and base[0]
        ]
        cpu = statistics.median(cpus) * 1e6 if cpus else None
        rate = statistics.median(row[1] for row in rows)
        ratio = statistics.median(ratios) if ratios else None
        data["cpu"][target] = {"cpu_us": cpu, "turns_per_s": rate, "ratio": ratio}
        shown = "-" if ratio is None else f"{ratio:.2f}x ({_spread(ratios)})"
        print(f"  {target:<13} {cpu or 0:>12.0f} {rate:>9.0f} {shown:>24}")
    session = data["cpu"]["session"]["ratio"]
    print(
        f"Goal: the front's CPU per turn <= {CPU_GOAL}x gRPC (session mode, the same submit): "
        f"{'met' if session is not None and session <= CPU_GOAL else 'MISSED'}"
    )
    print(f"\nTime to first chunk, {model_bench.CHUNKS} chunks from the fake model")
    print(f"  {'path':<13} {'TTFC p50 ms':>12} {'TTFC p99 ms':>12} {'added p50 ms':>13}")
    direct = ttfc["direct"].ttfc_ms(0.5) if ttfc["direct"].calls else None
    for path, figures in ttfc.items():
        if not figures.calls:
            continue
        p50, p99 = figures.ttfc_ms(0.5), figures.ttfc_ms(0.99)
        added = None if direct is None else p50 - direct
        data["ttfc"][path] = {"p50_ms": p50, "p99_ms": p99, "added_p50_ms": added}
        print(f"  {path:<13} {p50:>12.2f} {p99:>12.2f} {added or 0:>13.2f}")
    for path in ("stateless", "conversation"):
        added = data["ttfc"].get(path, {}).get("added_p50_ms")
        met = added is not None and added <= TTFC_GOAL_MS
        print(f"Goal: added TTFC p50 <= {TTFC_GOAL_MS:g} ms ({path}): {'met' if met else 'MISSED'}")
    return data


def main(argv: Sequence[str] | None = None) -> int:
    """Run both measurements; 1 when any call failed, else 0."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    _cli.add_output_options(parser, unpinned=None)
    args = parser.parse_args(argv)
    config = QUICK if args.quick else FULL
    env = bench_env()
    rounds, pinned = asyncio.run(measure_cpu(config, env))
    ttfc = asyncio.run(measure_ttfc(config, env))
    data = report(rounds, pinned, ttfc)
    failures = [f for rows in rounds.values() for row in rows for f in row[2]]
    failures += [f for figures in ttfc.values() for f in figures.failures]
    return _cli.finish(data, args.json, *_cli.first_of(failures), "calls")


if __name__ == "__main__":
    raise SystemExit(main())
