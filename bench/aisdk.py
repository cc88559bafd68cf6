"""The AI SDK front's price: server CPU per turn of `/ai-sdk/` turns against the same
server's Connect StreamTurn turns, over the same HTTP listener, in the same round.

One `serve` (memory store, HTTP listener; bench/service.py's memory server) runs both
targets, one after the other in every round, in alternating order, each with fresh
HTTP/1.1 connections (one per concurrent client, httpx, as bench/service.py's Connect
target). Both run the same turns on client-held sessions, as `useChat` keeps its chats:
the `/ping` route's deterministic answer, the whole history sent with every turn, a fresh
chat every TURNS_PER_CHAT turns (so a history holds up to 2 x TURNS_PER_CHAT - 1 messages).

- `connect`: StreamTurn with a `dispatch` of the history, Connect JSON (bench/_connect.py);
- `aisdk`: the AI SDK's chat request (`id`, UIMessages, `trigger`) posted to
  `/ai-sdk/ping`, its UI message stream read to `[DONE]`.

Sessions of both are created beforehand (CreateSession, client-held, outside the measured
time), so the measured turns are steady-state turns. The figure is the median over rounds
of the server's CPU microseconds per turn, and the median of the same-round ratios
aisdk / connect (goal: at most GOAL). httpx, pure Python, spends more CPU per turn than the
server: the load generator is the limit on throughput, so throughput is not the figure.

    .venv/bin/python -m bench.aisdk             # 5 rounds of 2 s per target
    .venv/bin/python -m bench.aisdk --quick     # one short round (smoke run)
    .venv/bin/python -m bench.aisdk --server-held  # server-held sessions: Connect submits
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import tempfile
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Final

import httpx

from . import _cli, _connect
from ._servers import Server, bench_env, placed, running
from ._turns import (
    DEFINITION_ID,
    ROOT,
    TURN_ANSWER,
    TURN_TEXT,
    failures_of,
    measure,
)
from .service import (
    FULL,
    QUICK,
    SERVICE_PATH,
    Config,
    Figures,
    server_commands,
)

TARGETS: Final = ("connect", "aisdk")
TURNS_PER_CHAT: Final = 10
GOAL: Final = 1.15
"""At most this many times the Connect turn's server CPU."""


class ChatWorker:
    """Turns on client-held chats, the history kept here; `turn` is the protocol's."""

    def __init__(self, client: httpx.AsyncClient, tag: str, held: bool) -> None:
        self.client = client
        self.tag = tag
        self.held = held
        """Server-held sessions instead: Connect submits, the AI SDK front takes the last
        user message of the history it is sent."""
        self.serial = 0
        self.chat = ""
        self.history: list[tuple[str, str]] = []
        """(message id, role) of the chat's messages; their texts are the ping's."""
        self.spare: list[str] = []

    async def create(self) -> str:
        """A new session of the ping definition (client-held unless `held`)."""
        mode = "HISTORY_MODE_SERVER" if self.held else "HISTORY_MODE_CLIENT"
        request = {"definitionId": DEFINITION_ID, "historyMode": mode}
        reply = await _connect.unary(self.client, f"{SERVICE_PATH}/CreateSession", request)
        return str(reply["session"]["sessionId"])

    async def prepare(self, calls: int) -> None:
        """Enough new chats for `calls` turns; the next turn starts a fresh chat."""
        needed = math.ceil(calls / TURNS_PER_CHAT) + 1
        self.spare.extend([await self.create() for _ in range(needed - len(self.spare))])
        self.chat, self.history = "", []

    async def next(self) -> None:
        """Switch to a fresh chat when the current one is full."""
        if not self.chat or len(self.history) >= 2 * TURNS_PER_CHAT:
            self.chat = self.spare.pop() if self.spare else await self.create()
            self.history = []

    async def call(self) -> str | None:
        """One turn: the history and a new user message; the answer joins the history."""
        self.serial += 1
        self.history.append((f"{self.tag}-u{self.serial}", "user"))
        answer_id, problem = await self.turn()
        if problem is None:
            self.history.append((answer_id, "assistant"))
        else:
            self.history.pop()
        return problem

    async def turn(self) -> tuple[str, str | None]:
        """(the answer's id, None) when the turn answered as expected, else what went wrong."""
        raise NotImplementedError

    def text(self, role: str) -> str:
        return TURN_TEXT if role == "user" else TURN_ANSWER


class ConnectWorker(ChatWorker):
    """StreamTurn with a dispatch of the history, Connect JSON over HTTP/1.1."""

    async def turn(self) -> tuple[str, str | None]:
        messages = [
            {"id": mid, "role": f"ROLE_{role.upper()}", "content": self.text(role)}
            for mid, role in self.history
        ]
        request: dict[str, Any] = {"sessionId": self.chat, "turnId": f"{self.tag}-t{self.serial}"}
        if self.held:
            request["submit"] = {"content": TURN_TEXT, "messageId": self.history[-1][0]}
        else:
            request["dispatch"] = {"messages": messages}
        try:
            events = await _connect.server_stream(
                self.client, f"{SERVICE_PATH}/StreamTurn", request
            )
        except (_connect.ConnectError, httpx.HTTPError) as exc:
            return "", f"connect turn: {type(exc).__name__} {exc}"
        last = events[-1] if events else {}
        if last.get("completed", {}).get("content") != TURN_ANSWER:
            return "", "connect turn: did not complete with the answer"
        return str(last["completed"]["assistantMessageId"]), None


class AiSdkWorker(ChatWorker):
    """The AI SDK's chat request to `/ai-sdk/ping`, its UI message stream read to the end."""

    async def turn(self) -> tuple[str, str | None]:
        messages = [
            {"id": mid, "role": role, "parts": [{"type": "text", "text": self.text(role)}]}
            for mid, role in self.history
        ]
        body = {"id": self.chat, "messages": messages, "trigger": "submit-message"}
        try:
            response = await self.client.post(f"/ai-sdk/{DEFINITION_ID}", json=body)
        except httpx.HTTPError as exc:
            return "", f"ai-sdk turn: {type(exc).__name__}"
        if response.status_code != 200:
            return "", f"ai-sdk turn: HTTP {response.status_code}"
        chunks = [
            json.loads(line[6:]) for line in response.text.split("\n") if line.startswith("data: {")
        ]
        text = "".join(c["delta"] for c in chunks if c["type"] == "text-delta")
        if text != TURN_ANSWER or chunks[-1]["type"] != "finish":
            return "", "ai-sdk turn: did not finish with the answer"
        return str(chunks[0]["messageId"]), None


async def run_round(target: str, server: Server, config: Config, held: bool) -> Any:
    """Warm up, prepare and measure `target` with fresh connections."""
    async with AsyncExitStack() as stack:
        workers: list[ChatWorker] = []
        for index in range(config.clients):
            client = await _connect.own_client(stack, server.http_address)
            kind = AiSdkWorker if target == "aisdk" else ConnectWorker
            workers.append(kind(client, f"{target[0]}{index}", held))
        warm = await measure(workers, server.cpu_seconds, config.warmup)
        if warm.failures:
            return warm
        expected = warm.calls / warm.elapsed * config.seconds / config.clients
        await asyncio.gather(*(w.prepare(math.ceil(expected * 1.5) + 10) for w in workers))
        return await measure(workers, server.cpu_seconds, config.seconds)


async def run(config: Config, held: bool) -> tuple[dict[str, Figures], list[float], bool]:
    """Every round on a new server: both targets, in alternating order."""
    figures = {target: Figures(target) for target in TARGETS}
    ratios: list[float] = []
    env = bench_env()
    async with AsyncExitStack() as stack:
        state_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="aisdk-bench-")))
        server_cpus, _ = placed(stack, config.pin)
        for number in range(config.rounds):
            command = server_commands(state_dir / f"round-{number}")["memory"]
            order = TARGETS if number % 2 == 0 else TARGETS[::-1]
            async with running("memory", command, cwd=ROOT, env=env, cpus=server_cpus) as server:
                per_turn: dict[str, float] = {}
                for target in order:
                    phase = await run_round(target, server, config, held)
                    figures[target].add(phase)
                    if phase.server_cpu is not None:
                        per_turn[target] = phase.server_cpu / max(phase.calls, 1)
            if len(per_turn) == len(TARGETS):
                ratios.append(per_turn["aisdk"] / per_turn["connect"])
    return figures, ratios, server_cpus is not None


def report(
    figures: dict[str, Figures], ratios: list[float], config: Config, pinned: bool, held: bool
) -> Any:
    """Print the table and the goal line; the figures as plain data."""
    where = "server on its own CPU" if pinned else "placement left to the scheduler"
    mode = "server-held" if held else "client-held"
    print(
        f"\nAI SDK front vs Connect, same server and listener: {config.clients} clients,"
        f" {config.rounds} round(s) x {config.seconds:g} s per target, {mode} chats of"
        f" up to {TURNS_PER_CHAT} turns ({os.cpu_count()} CPUs, {where})"
    )
    print(f"  {'target':<8} {'turns/s':>9} {'p50 ms':>8} {'CPU us/turn':>12}  per round")
    data: dict[str, Any] = {}
    for name, found in figures.items():
        rounds = [round(value) for value in found.cpu_us]
        cpu, per_s = found.median_cpu_us(), statistics.median(found.per_s)
        print(
            f"  {name:<8} {per_s:>9,.0f} {found.percentile_ms(0.5):>8.2f}"
            f" {'-' if cpu is None else f'{cpu:,.0f}':>12}  {rounds}"
        )
        data[name] = {"turns_per_s": per_s, "cpu_us_per_turn": cpu, "rounds_us": rounds}
    ratio = statistics.median(ratios) if ratios else None
    spread = f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "-"
    verdict = "-" if ratio is None else ("met" if ratio <= GOAL else "MISSED")
    print(
        f"  aisdk / connect server CPU per turn: median {'-' if ratio is None else f'{ratio:.2f}'}x"
        f" (rounds {spread}; goal <= {GOAL}x): {verdict}"
    )
    data["ratio"] = ratio
    data["round_ratios"] = ratios
    return data


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table; 1 when any turn failed, else 0."""
    parser = argparse.ArgumentParser(description=__doc__)
    _cli.add_run_options(parser, rounds=FULL.rounds)
    parser.add_argument("--seconds", type=float, help=f"seconds per target [{FULL.seconds}]")
    parser.add_argument("--clients", type=int, help=f"concurrent clients [{FULL.clients}]")
    _cli.add_output_options(parser, unpinned="leave placement to the scheduler")
    parser.add_argument(
        "--server-held", action="store_true", help="server-held sessions (Connect submits)"
    )
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    config = Config(**_cli.load_from(args, base), pin=not args.no_pin)
    figures, ratios, pinned = asyncio.run(run(config, args.server_held))
    data = report(figures, ratios, config, pinned, args.server_held)
    return _cli.finish(data, args.json, *failures_of(figures.values()), "turns", stream=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
