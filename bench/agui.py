"""AG-UI turns against Connect turns: the server CPU per turn of the same server, same round.

One `serve` (memory store, the ping definition, an HTTP listener) runs in a child process;
this process generates load over HTTP/1.1 (httpx, one connection per client). Each round
measures, one after the other in an order that alternates from round to round:

- `connect`: `StreamTurn` over the Connect protocol (JSON messages), a `/ping` submit to a
  server-held session, read to its end-of-stream message (bench.service's ConnectWorker);
- `agui`: the same turn as an AG-UI run, `POST /agui/ping` with a `RunAgentInput` whose
  last message is the new `/ping` (the thread is the same kind of server-held session),
  its SSE answer read to `RUN_FINISHED`.

The figure is the server's CPU time per turn (user + system, from /proc), not throughput:
the load generator is pure Python and may be the limit. The table gives each target's
median over the rounds with its spread, and the median of the same-round ratios
agui / connect (goal: at most GOAL). With two or more CPUs the server runs on the last one
and the load on the others (`--no-pin` leaves placement to the scheduler).

    .venv/bin/python -m bench.agui               # 5 rounds of 2 s per target
    .venv/bin/python -m bench.agui --quick       # one short round, a smoke test
    .venv/bin/python -m bench.agui --sqlite      # a SQLite store (AG-UI reads the session)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Final

import httpx

from . import _cli, _connect
from ._servers import Server, bench_env, placed, running
from ._turns import (
    DEFINITION_ID,
    ROOT,
    TURN_ANSWER,
    TURN_TEXT,
    Phase,
    SessionWorker,
    measure,
)
from .service import (
    FULL,
    QUICK,
    Config,
    ConnectWorker,
    server_commands,
)

TARGETS: Final = ("connect", "agui")
GOAL: Final = 1.15
"""AG-UI turns over Connect turns, server CPU per turn, same server and round."""


class AguiWorker(SessionWorker):
    """AG-UI runs on server-held sessions (created over Connect): each a new `/ping`."""

    def __init__(self, client: httpx.AsyncClient, tag: str) -> None:
        super().__init__(tag)
        self.connect = ConnectWorker(client, tag)
        self.client = client

    async def create(self) -> str:
        """A new session of the ping definition."""
        return await self.connect.create()

    async def turn(self, turn_id: str) -> str | None:
        """One run, read to its end; it must finish with the route's answer."""
        body = {
            "threadId": self.session,
            "runId": turn_id,
            "state": {},
            "messages": [{"id": f"m-{turn_id}", "role": "user", "content": TURN_TEXT}],
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        types: list[str] = []
        text: list[str] = []
        try:
            async with self.client.stream(
                "POST", f"/agui/{DEFINITION_ID}", json=body, headers=headers
            ) as response:
                if response.status_code != 200:
                    return f"agui: HTTP {response.status_code}"
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        event = json.loads(line[5:])
                        types.append(event["type"])
                        if event["type"] == "TEXT_MESSAGE_CONTENT":
                            text.append(event["delta"])
        except httpx.HTTPError as exc:
            return f"agui: {type(exc).__name__}"
        if not types or types[-1] != "RUN_FINISHED":
            return f"agui: events {types}"
        if "".join(text) != TURN_ANSWER:
            return "agui: unexpected answer"
        return None


async def run_round(target: str, server: Server, config: Config) -> Phase:
    """Warm up, prepare and measure `target` with fresh connections."""
    assert server.http_address is not None
    async with AsyncExitStack() as stack:
        workers: list[SessionWorker] = []
        for index in range(config.clients):
            client = await _connect.own_client(stack, server.http_address)
            kind = AguiWorker if target == "agui" else ConnectWorker
            workers.append(kind(client, f"{target[0]}{index}"))
        warm = await measure(workers, server.cpu_seconds, config.warmup)
        if warm.failures:
            return warm
        expected = warm.calls / warm.elapsed * config.seconds / config.clients
        await asyncio.gather(*(w.prepare(int(expected * 1.5) + 10) for w in workers))
        return await measure(workers, server.cpu_seconds, config.seconds)


async def run(
    config: Config, store: str = "memory"
) -> tuple[list[dict[str, float]], list[str], bool]:
    """Per round, each target's server CPU per turn (µs) on a server with `store` (memory
    or sqlite); failures; whether the server was pinned."""
    env = bench_env()
    rounds: list[dict[str, float]] = []
    failures: list[str] = []
    async with AsyncExitStack() as stack:
        state_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="agui-bench-")))
        server_cpus, _ = placed(stack, config.pin)
        command = server_commands(state_dir)[store]
        if store == "sqlite":
            command = [*command, "--http-listen", "127.0.0.1:0"]
        async with running(store, command, cwd=ROOT, env=env, cpus=server_cpus) as server:
            for number in range(config.rounds):
                order = TARGETS if number % 2 == 0 else TARGETS[::-1]
                figures: dict[str, float] = {}
                for target in order:
                    phase = await run_round(target, server, config)
                    failures.extend(phase.failures[:3])
                    if phase.server_cpu is not None and phase.calls:
                        figures[target] = phase.server_cpu / phase.calls * 1e6
                rounds.append(figures)
    return rounds, failures, server_cpus is not None


def report(rounds: list[dict[str, float]], pinned: bool) -> str:
    """The table: median per-turn CPU with its range, and the same-round ratio."""
    lines = [
        "AG-UI turns vs Connect turns, same server and round (server CPU per turn)",
        f"rounds: {len(rounds)}; server {'pinned to its own CPU' if pinned else 'not pinned'}",
        f"{'target':<10} {'median µs':>10} {'min':>8} {'max':>8}",
    ]
    for target in TARGETS:
        values = [r[target] for r in rounds if target in r]
        if values:
            lines.append(
                f"{target:<10} {statistics.median(values):>10.0f} "
                f"{min(values):>8.0f} {max(values):>8.0f}"
            )
    ratios = [r["agui"] / r["connect"] for r in rounds if "agui" in r and "connect" in r]
    if ratios:
        median = statistics.median(ratios)
        verdict = "meets" if median <= GOAL else "misses"
        lines.append(
            f"agui/connect: median {median:.2f}x (rounds {min(ratios):.2f}x-{max(ratios):.2f}x); "
            f"{verdict} the goal of at most {GOAL:.2f}x"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table; 1 when a turn failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one short round")
    parser.add_argument("--rounds", type=int, help="rounds (default 5)")
    parser.add_argument("--clients", type=int, help="concurrent clients (default 16)")
    parser.add_argument("--no-pin", action="store_true", help="leave CPU placement alone")
    parser.add_argument("--sqlite", action="store_true", help="a SQLite store, not memory")
    args = parser.parse_args(argv)
    config = Config(**_cli.load_from(args, QUICK if args.quick else FULL), pin=not args.no_pin)
    store = "sqlite" if args.sqlite else "memory"
    rounds, failures, pinned = asyncio.run(run(config, store))
    print(f"store: {store}")
    print(report(rounds, pinned))
    for failure in failures[:5]:
        print(f"failure: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
