"""The deterministic gRPC turn's server CPU, broken down against its floor.

`python -m bench.floor [--rounds N] [--turns N] [--clients N] [--quick] [--json PATH]`
splits the server CPU of one `/ping` turn of `serve` over gRPC into three parts:

- the transport's floor: a bare grpc.aio server-streaming echo of the turn's four messages
  (bench/_echo.py), its server CPU per call;
- the turn itself: `ChatService.run_turn` in this process, with no transport, on the same
  definition and store (SQLite at `synchronous=normal`, as `serve` uses it, and the memory
  store), its process CPU per turn (every thread, SQLite's included);
- the rest: what `serve` spends per turn beyond the two (interceptors, authentication, the
  stall watch, event conversion, the per-call context, task hops, the live-turn bus).

The echo and `serve` are measured by bench.service, run as a child process with the same
client count (`--clients`, default 1), its servers on the last CPU; the in-process turns
run pinned to that CPU too, alone, between its rounds' measurements, in sessions of
TURNS_PER_SESSION turns like the service benchmark's clients. The goal: the rest at most
REST_GOAL_US microseconds, on SQLite and on the memory store.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from agentskit_chat.conversation import load_definitions
from agentskit_chat.service import Catalog, ChatService, Completed, Submit, TurnRequest
from agentskit_chat.storage import HistoryMode, MemoryStore, Store, open_sqlite_store

from . import _cli
from ._servers import placement
from ._turns import DEFINITION_ID, DEFINITIONS, ROOT, TURN_ANSWER, TURN_TEXT, TURNS_PER_SESSION

REST_GOAL_US: Final = 150.0
"""The goal: `serve`'s CPU per turn beyond the echo's and the in-process turn's."""
KEY: Final = b"floor-bench-deployment-key-32byt"
STORES: Final = ("sqlite", "memory")


@dataclass(frozen=True, slots=True)
class Config:
    """Rounds of in-process turns, turns a round, and the service benchmark's load."""

    rounds: int
    turns: int
    clients: int
    service_rounds: int
    seconds: float


FULL: Final = Config(rounds=5, turns=3000, clients=1, service_rounds=5, seconds=2.0)
QUICK: Final = Config(rounds=1, turns=200, clients=1, service_rounds=1, seconds=0.3)


async def ping_chat(
    store_name: str, database: Path, turns: int
) -> tuple[ChatService, Store, list[str]]:
    """A ChatService of the ping definition on `store_name` (SQLite at `database`), its
    store, and enough new server-held sessions for `turns` turns and a warm-up (the last)."""
    store: Store
    if store_name == "sqlite":
        store = await open_sqlite_store(database)
    else:
        store = MemoryStore()
    chat = ChatService(Catalog(load_definitions(DEFINITIONS).values()), store, digest_key=KEY)
    sessions = [
        (await chat.create_session(DEFINITION_ID, None, HistoryMode.SERVER)).session_id
        for _ in range(turns // TURNS_PER_SESSION + 2)
    ]
    return chat, store, sessions


async def in_process_cpu_us(store_name: str, turns: int, scratch: Path) -> float:
    """Process CPU microseconds per `/ping` turn through `ChatService.run_turn`."""
    database = scratch / f"floor-{time.monotonic_ns()}.db"
    chat, store, sessions = await ping_chat(store_name, database, turns)
    await run_turns(chat, sessions[-1:], min(turns, 2 * TURNS_PER_SESSION) // 2, "warm")
    started = time.process_time()
    await run_turns(chat, sessions[:-1], turns, "timed")
    used = time.process_time() - started
    await chat.close()
    await store.close()
    return used / turns * 1e6


async def run_turns(chat: ChatService, sessions: list[str], turns: int, tag: str) -> None:
    """`turns` `/ping` turns through `chat.run_turn`, TURNS_PER_SESSION to a session of
    `sessions` in turn; RuntimeError when one does not complete with the answer."""
    for number in range(turns):
        session = sessions[number // TURNS_PER_SESSION % len(sessions)]
        request = TurnRequest(session, f"{tag}-{number}", Submit(TURN_TEXT))
        last = None
        async for event in chat.run_turn(request):
            last = event
        if not isinstance(last, Completed) or last.content != TURN_ANSWER:
            raise RuntimeError(f"the in-process turn did not complete with the answer: {last}")


def run_in_process(config: Config, scratch: Path) -> dict[str, list[float]]:
    """Each store's CPU per turn, a figure per round, pinned to the servers' CPU."""
    where = placement()
    before = os.sched_getaffinity(0) if where is not None else None
    if where is not None:
        os.sched_setaffinity(0, where[0])
    figures: dict[str, list[float]] = {name: [] for name in STORES}
    try:
        for _ in range(config.rounds):
            for name in STORES:
                cpu = asyncio.run(in_process_cpu_us(name, config.turns, scratch))
                figures[name].append(cpu)
    finally:
        if before is not None:
            os.sched_setaffinity(0, before)
    return figures


def run_service(config: Config, scratch: Path) -> dict[str, Any]:
    """bench.service's figures (echo, memory, sqlite) at `config.clients` clients."""
    out = scratch / "service.json"
    argv = [sys.executable, "-m", "bench.service", "--clients", str(config.clients)]
    argv += ["--rounds", str(config.service_rounds), "--seconds", str(config.seconds)]
    argv += ["--json", str(out)]
    print(f"$ {' '.join(argv[1:])}", flush=True)
    status = subprocess.run(argv, cwd=ROOT, check=False).returncode
    if not out.exists():
        raise RuntimeError(f"bench.service wrote no figures (exit status {status})")
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def report(
    in_process: dict[str, list[float]], service: dict[str, Any], config: Config, *, quick: bool
) -> dict[str, Any]:
    """Print the breakdown; its figures as plain data."""
    targets = service["targets"]
    echo = targets["echo"]["server_cpu_us_per_call"]
    print(
        f"\nThe deterministic gRPC turn's server CPU, {config.clients} client(s)"
        f" ({os.cpu_count()} CPUs, Python {platform.python_version()}): microseconds per turn"
    )
    print(f"  {'store':<8} {'serve':>8} {'echo':>8} {'in-process':>11} {'rest':>8}  goal")
    data: dict[str, Any] = {"config": asdict(config), "echo_us": echo, "stores": {}}
    for name in STORES:
        served = targets[name]["server_cpu_us_per_call"]
        turn = statistics.median(in_process[name])
        rest = None if served is None or echo is None else served - echo - turn
        met = rest is not None and rest <= REST_GOAL_US
        data["stores"][name] = {
            "serve_us": served,
            "in_process_us": turn,
            "in_process_rounds_us": in_process[name],
            "rest_us": rest,
            "goal_met": met,
        }
        cells = [_us(served), _us(echo), _us(turn), _us(rest)]
        verdict = f"rest <= {REST_GOAL_US:.0f}: {'met' if met else 'MISSED'}"
        print(f"  {name:<8} {cells[0]:>8} {cells[1]:>8} {cells[2]:>11} {cells[3]:>8}  {verdict}")
    if quick:
        print("  (--quick: too few samples to trust)")
    return data


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the breakdown and print it; 1 when a turn failed or a figure is missing."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    _cli.add_run_options(parser, rounds=FULL.rounds)
    parser.add_argument("--turns", type=int, help=f"in-process turns a round [{FULL.turns}]")
    parser.add_argument("--clients", type=int, help=f"the service's clients [{FULL.clients}]")
    _cli.add_output_options(parser, unpinned=None)
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    config = Config(
        rounds=args.rounds or base.rounds,
        turns=args.turns or base.turns,
        clients=args.clients or base.clients,
        service_rounds=args.rounds or base.service_rounds,
        seconds=base.seconds,
    )
    with tempfile.TemporaryDirectory(prefix="chat-floor-") as scratch:
        try:
            in_process = run_in_process(config, Path(scratch))
            service = run_service(config, Path(scratch))
        except RuntimeError as exc:
            print(f"INVALID: {exc}")
            return 1
    data = report(in_process, service, config, quick=args.quick)
    missing = [name for name, row in data["stores"].items() if row["rest_us"] is None]
    return _cli.finish(data, args.json, *_cli.first_of(missing), "figures")


if __name__ == "__main__":
    raise SystemExit(main())
