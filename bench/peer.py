"""The service beside a peer: one deterministic conversation through `serve` and through
LangGraph, side by side in one run.

The conversation is the support example's (`examples/definitions/support.yaml`): `/start`
answers "What is your name?" and moves idle -> collecting, `/name Ada` answers "Welcome,
Ada." and moves to complete. Each conversation is a new session of two turns.

- The service: `serve` on SQLite, its own process pinned to one core, driven over gRPC by
  one client in this process (a session created untimed, then each StreamTurn timed from the
  call to its last event).
- The peer: LangGraph in this process (pinned to the other cores), with its SQLite
  checkpointer (`SqliteSaver`) on a file of its own: a graph of one router node that does
  what the definition's two routes do (match the input in the current state, answer, move
  on) and keeps the message history in its state, as the service keeps it in its record.
  A turn is one `invoke` on the conversation's thread.

Each side runs at both SQLite durability levels, in WAL mode (as the checkpointer sets
it): `synchronous=normal` (the service's default: a commit is not synced, a power loss can
lose the last turns) and `full` (every commit synced; the default of Python's sqlite3, so
LangGraph's own). Four sides, then: two `serve` processes (`--sqlite-synchronous normal` and
`full`) and two checkpointer files. Every round measures each side once, in an order
rotated from round to round; each round's ratio is the peer's median turn time over the
service's at the same durability, and the run reports the median ratio and its range. The
goal is judged at equal durability, `normal`; the line "each side's default" (LangGraph at
`full`, the service at `normal`) is how the two compare out of the box. The service crosses
a process boundary and gRPC on every turn and the peer does not, so the ratios understate
the service's own speed.
"""

from __future__ import annotations

import argparse
import asyncio
import operator
import os
import platform
import re
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, closing
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Final, TypedDict

import grpc
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc

from . import _cli
from ._servers import Server, bench_env, placed, running
from ._turns import ROOT

EXAMPLES: Final = ROOT / "examples" / "definitions"
DEFINITION_ID: Final = "support"
CONVERSATION: Final = (("/start", "What is your name?"), ("/name Ada", "Welcome, Ada."))
NAME: Final = re.compile(r"^/name (?P<name>\S.*)$")
GOAL: Final = 2.5
"""The peer's turn time over the service's, at least."""


@dataclass(frozen=True, slots=True)
class Config:
    """Rounds, conversations per side and round, warm-up conversations, pinning."""

    rounds: int
    conversations: int
    warmup: int
    pin: bool = True


FULL = Config(rounds=6, conversations=100, warmup=20)
QUICK = Config(rounds=2, conversations=8, warmup=2)
LEVELS: Final = ("normal", "full")
SIDES: Final = tuple(f"{name}-{level}" for name in ("service", "langgraph") for level in LEVELS)


class Chat(TypedDict, total=False):
    """The peer's conversation state, checkpointed after every turn."""

    state: str
    input: str
    answer: str
    messages: Annotated[list[dict[str, str]], operator.add]


def router(chat: Chat) -> Chat:
    """The support definition's routes: `/start` in idle, `/name NAME` in collecting."""
    state, text = chat.get("state", "idle"), chat.get("input", "")
    answer, target = "I cannot help with that.", state
    if state == "idle" and text == "/start":
        answer, target = "What is your name?", "collecting"
    elif state == "collecting" and (found := NAME.match(text)) is not None:
        answer, target = f"Welcome, {found['name']}.", "complete"
    messages = [{"role": "user", "content": text}, {"role": "assistant", "content": answer}]
    return {"state": target, "answer": answer, "messages": messages}


class Peer:
    """The LangGraph side: a compiled one-node graph over a SQLite checkpointer."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.connection = sqlite3.connect(str(path), check_same_thread=False)
        saver = SqliteSaver(self.connection)
        saver.setup()  # WAL mode and the checkpoint tables
        self.connection.execute(f"PRAGMA synchronous={synchronous.upper()}")
        graph: Any = StateGraph(Chat)
        graph.add_node("router", router)
        graph.add_edge(START, "router")
        graph.add_edge("router", END)
        self.graph: Any = graph.compile(checkpointer=saver)

    def conversation(self, latencies: list[float]) -> str | None:
        """One conversation on a new thread, each turn timed; what went wrong, if anything."""
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        clock = time.perf_counter
        for text, expected in CONVERSATION:
            start = clock()
            out = self.graph.invoke({"input": text}, config)
            latencies.append(clock() - start)
            if out.get("answer") != expected:
                return f"peer: unexpected answer {out.get('answer')!r}"
        return None


class Service:
    """The service side: one gRPC client of `serve`."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.stub = chat_pb2_grpc.ChatServiceStub(channel)
        self.serial = 0

    async def conversation(self, latencies: list[float]) -> str | None:
        """One conversation on a new session (created untimed), each turn timed."""
        created = await self.stub.CreateSession(
            pb.CreateSessionRequest(definition_id=DEFINITION_ID)
        )
        session = created.session.session_id
        clock = time.perf_counter
        for text, expected in CONVERSATION:
            self.serial += 1
            request = pb.StreamTurnRequest(
                session_id=session,
                turn_id=f"t{self.serial}",
                submit=pb.SubmitOperation(content=text),
            )
            start = clock()
            events = [event async for event in self.stub.StreamTurn(request)]
            latencies.append(clock() - start)
            last = events[-1] if events else None
            if last is None or last.WhichOneof("event") != "completed":
                return "service: the turn did not complete"
            if last.completed.content != expected:
                return f"service: unexpected answer {last.completed.content!r}"
        return None


@dataclass(slots=True)
class Side:
    """One side's figures over the rounds."""

    name: str
    p50_ms: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def add(self, latencies: list[float], cpu_seconds: float | None) -> None:
        """Fold in one round's turns and the CPU they took."""
        self.latencies.extend(latencies)
        self.p50_ms.append(statistics.median(latencies) * 1e3)
        if cpu_seconds is not None:
            self.cpu_us.append(cpu_seconds / len(latencies) * 1e6)


Measured = tuple[list[float], float | None, list[str]]
"""A round's turn latencies, the CPU seconds they took, and what went wrong."""


async def _service_round(service: Service, server: Server, count: int) -> Measured:
    latencies: list[float] = []
    failures: list[str] = []
    before = server.cpu_seconds()
    for _ in range(count):
        if (problem := await service.conversation(latencies)) is not None:
            failures.append(problem)
    after = server.cpu_seconds()
    used = None if before is None or after is None else after - before
    return latencies, used, failures


async def _peer_round(peer: Peer, count: int) -> Measured:
    """In this process, blocking the event loop (nothing else runs on it meanwhile)."""
    latencies: list[float] = []
    failures: list[str] = []
    before = time.process_time()
    for _ in range(count):
        if (problem := peer.conversation(latencies)) is not None:
            failures.append(problem)
    return latencies, time.process_time() - before, failures


def serve_command(state_dir: Path, synchronous: str) -> list[str]:
    """`serve` on a new SQLite database with the example definitions."""
    argv = [sys.executable, "-m", "agentskit_chat.cli", "serve", "--listen", "127.0.0.1:0"]
    argv += ["--definitions", str(EXAMPLES), "--drain-delay", "0", "--state-dir", str(state_dir)]
    argv += ["--store", f"sqlite:{state_dir / 'sessions.db'}"]
    return [*argv, "--sqlite-synchronous", synchronous]


async def run(config: Config) -> tuple[dict[str, Side], bool]:
    """Measure every side round by round; the sides' figures and whether they were pinned."""
    sides = {name: Side(name) for name in SIDES}
    env = bench_env()
    async with AsyncExitStack() as stack:
        state = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="chat-peer-")))
        server_cpus, _ = placed(stack, config.pin)
        rounds: dict[str, Callable[[int], Awaitable[Measured]]] = {}
        for level in LEVELS:
            (state / level).mkdir()
            argv = serve_command(state / level, level)
            server = await stack.enter_async_context(
                running(f"serve-{level}", argv, cwd=ROOT, env=env, cpus=server_cpus)
            )
            channel = grpc.aio.insecure_channel(server.address)
            await stack.enter_async_context(channel)
            rounds[f"service-{level}"] = partial(_service_round, Service(channel), server)
            peer = Peer(state / f"langgraph-{level}.db", level)
            stack.enter_context(closing(peer.connection))
            rounds[f"langgraph-{level}"] = partial(_peer_round, peer)
        for measure in rounds.values():
            await measure(config.warmup)
        for number in range(config.rounds):
            order = SIDES[number % len(SIDES) :] + SIDES[: number % len(SIDES)]
            for name in order:
                latencies, cpu, failures = await rounds[name](config.conversations)
                sides[name].add(latencies, cpu)
                sides[name].failures.extend(failures)
    return sides, server_cpus is not None


def _ratios(sides: dict[str, Side], peer: str, service: str) -> list[float]:
    """Round by round, the peer's median turn time over the service's."""
    pairs = zip(sides[service].p50_ms, sides[peer].p50_ms, strict=True)
    return [theirs / mine for mine, theirs in pairs]


def report(sides: dict[str, Side], config: Config, *, quick: bool, pinned: bool) -> dict[str, Any]:
    """Print the comparison and the goal line; the figures as plain data."""
    where = "each serve pinned to one core, client and LangGraph on the others"
    one, five, _ = os.getloadavg()
    print(
        f"\nThe service beside LangGraph: the support conversation (2 turns), one client,"
        f" {config.rounds} interleaved round(s) x {config.conversations} conversations per side"
        f" ({os.cpu_count()} CPUs, {where if pinned else 'placement unpinned'};"
        f" load average {one:.2f}/{five:.2f} at the end; Python {platform.python_version()})"
    )
    print(f"  {'side':<16} {'p50 ms':>7} {'p99 ms':>7} {'CPU us/turn':>12}  rounds: p50 ms")
    data: dict[str, Any] = {}
    for side in sides.values():
        ordered = sorted(side.latencies)
        p99 = ordered[max(int(len(ordered) * 0.99) - 1, 0)] * 1e3
        cpu = statistics.median(side.cpu_us) if side.cpu_us else None
        data[side.name] = {
            "turns": len(side.latencies),
            "failures": len(side.failures),
            "p50_ms": statistics.median(side.latencies) * 1e3,
            "p99_ms": p99,
            "rounds_p50_ms": side.p50_ms,
            "cpu_us_per_turn": cpu,
        }
        rounds = " ".join(f"{value:.2f}" for value in side.p50_ms)
        print(
            f"  {side.name:<16} {data[side.name]['p50_ms']:>7.2f} {p99:>7.2f}"
            f" {'-' if cpu is None else f'{cpu:,.0f}':>12}  {rounds}"
        )
    print(
        "  CPU us/turn: the serve process's CPU over a round (session creation included) per"
        " turn, client not counted; this process's for LangGraph"
    )
    comparisons = {
        "normal": ("langgraph-normal", "service-normal"),
        "full": ("langgraph-full", "service-full"),
        "defaults": ("langgraph-full", "service-normal"),
    }
    ratios: dict[str, Any] = {}
    for label, (peer, service) in comparisons.items():
        per_round = _ratios(sides, peer, service)
        ratios[label] = {"ratio": statistics.median(per_round), "rounds": per_round}
        what = "each side's default" if label == "defaults" else f"both at {label}"
        print(
            f"  a LangGraph turn takes {ratios[label]['ratio']:.2f}x the service's, {what}"
            f" (median of rounds, range {min(per_round):.2f}-{max(per_round):.2f})"
        )
    ratio = ratios["normal"]["ratio"]
    met = ratio >= GOAL
    note = " (--quick: too few samples to trust)" if quick else ""
    print(
        f"Goal{note}: at equal durability (normal) {ratio:.2f}x (goal >= {GOAL}x):"
        f" {'met' if met else 'MISSED'}"
    )
    return {
        "config": asdict(config),
        "pinned": pinned,
        "sides": data,
        "ratios": ratios,
        "ratio": ratio,
        "goal": GOAL,
        "goal_met": met,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison and print it; 1 when any turn failed, else 0."""
    parser = argparse.ArgumentParser(description=__doc__)
    _cli.add_run_options(parser, rounds=FULL.rounds, quick="two short rounds (smoke run)")
    parser.add_argument(
        "--conversations", type=int, help=f"conversations per side and round [{FULL.conversations}]"
    )
    _cli.add_output_options(parser)
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    config = Config(
        rounds=args.rounds or base.rounds,
        conversations=args.conversations or base.conversations,
        warmup=base.warmup,
        pin=not args.no_pin,
    )
    sides, pinned = asyncio.run(run(config))
    data = report(sides, config, quick=args.quick, pinned=pinned)
    failures = [problem for side in sides.values() for problem in side.failures]
    return _cli.finish(data, args.json, *_cli.first_of(failures), "conversations")


if __name__ == "__main__":
    raise SystemExit(main())
