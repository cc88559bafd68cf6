"""Service throughput: deterministic turns against a bare grpc.aio streaming echo.

Every server runs in its own child process; this process only generates load, with one
channel (or HTTP connection) per concurrent client. Each round measures the echo, the echo
with the tracing interceptor exporting its server spans, the service with the memory store,
the same server's turns over its HTTP listener with the Connect protocol (JSON messages,
HTTP/1.1, as a browser sends them; bench/_connect.py), and the service with SQLite, one
after the other. Throughput is the median round; each ratio pairs a target with the echo of
the same round, and Connect with the gRPC turns of its own server (the two alternate in
going first from round to round). The echo streams four replies of a turn's message sizes
(bench/_echo.py; `--echo-replies 2` for two short ones); the `Latency` line gives the
SQLite turn's p50 over the echo's, whose goal holds with one client (`--clients 1`).
Telemetry's price on turns is bench/telemetry.py's.
The Connect client is httpx, pure Python, which spends more CPU per turn than grpcio's C
core: when the load generator's CPU is the limit (the server's CPU share shows it), the
server CPU per turn, printed beside the ratio, is the fairer comparison.

With two or more CPUs, the servers run on the last one and the load generator and the
collector on the others, so a server never competes with the load for its core and every
server runs where the others did (left to the scheduler, identical servers differ by up
to a fifth in the same round). `--no-pin` leaves placement to the scheduler. Each target's
server is a new process that runs only for its own measurement, so neither a slow
process nor another server's leftover export work favours one target; the Connect target
is the exception, since it is compared with gRPC inside one process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import grpc
import httpx

from . import _cli, _connect, _echo, _servers
from ._servers import Server, bench_env, placed, running
from ._turns import (
    DEFINITION_ID,
    DEFINITIONS,
    OWN_CONNECTION,
    ROOT,
    TURN_ANSWER,
    TURN_TEXT,
    ChatWorker,
    Load,
    Phase,
    Rounds,
    SessionWorker,
    Worker,
    failures_of,
    warm_and_measure,
)

SERVICE_PATH: Final = "/agentskit.chat.v1.ChatService"
EVENT_KINDS: Final = ("started", "decision", "delta", "completed", "failed")
TARGETS: Final = ("echo", "echo-traced", "memory", "connect", "sqlite")
GUESTS: Final = {"connect": "memory"}
"""Targets measured on another target's server, in the same round: Connect turns over the
memory server's HTTP listener, right before or after its gRPC turns (alternately)."""
GOALS: Final = {"memory": 0.8, "sqlite": 0.6}
LATENCY_GOAL: Final = 2.0
"""One-client SQLite turn p50 over the echo's p50, at most."""


HTTP_TIMEOUT: Final = _connect.TIMEOUT


@dataclass(frozen=True, slots=True)
class Config(Load):
    """Clients, rounds, seconds of warm-up and measurement per target and round; pinning."""

    pin: bool = True
    echo_replies: int = len(_echo.REPLIES)


FULL = Config(clients=16, rounds=5, seconds=2.0, warmup=1.0)
QUICK = Config(clients=16, rounds=1, seconds=0.3, warmup=0.1)


class EchoWorker:
    """Calls the echo as a registered method, like generated stubs do, and reads every reply."""

    def __init__(self, channel: grpc.aio.Channel, replies: int = len(_echo.REPLIES)) -> None:
        self.replies = replies
        self.stream: grpc.aio.UnaryStreamMultiCallable[bytes, bytes] = channel.unary_stream(
            _echo.PATH, _registered_method=True
        )  # type: ignore[call-arg]

    async def prepare(self, calls: int) -> None:
        """Nothing to prepare."""

    async def next(self) -> None:
        """Nothing to do between calls."""

    async def call(self) -> str | None:
        """One echo call."""
        try:
            replies = [reply async for reply in self.stream(b"ping")]
        except grpc.aio.AioRpcError as exc:
            return f"echo: {exc.code().name}"
        return None if len(replies) == self.replies else f"echo: {len(replies)} replies"


class ConnectWorker(SessionWorker):
    """Turns over the HTTP listener: the Connect protocol with JSON messages, on HTTP/1.1."""

    def __init__(self, client: httpx.AsyncClient, tag: str) -> None:
        super().__init__(tag)
        self.client = client

    async def create(self) -> str:
        """A new session of the ping definition."""
        reply = await _connect.unary(
            self.client, f"{SERVICE_PATH}/CreateSession", {"definitionId": DEFINITION_ID}
        )
        return str(reply["session"]["sessionId"])

    async def turn(self, turn_id: str) -> str | None:
        """One turn, read to its end-of-stream message; the last event must complete it."""
        request = {"sessionId": self.session, "turnId": turn_id, "submit": {"content": TURN_TEXT}}
        try:
            events = await _connect.server_stream(
                self.client, f"{SERVICE_PATH}/StreamTurn", request
            )
        except _connect.ConnectError as exc:
            return f"turn: {exc.code} {exc.message}"
        except httpx.HTTPError as exc:
            return f"turn: {type(exc).__name__}"
        if not events or "completed" not in events[-1]:
            return f"turn: events {[_event_kind(event) for event in events]}"
        if events[-1]["completed"].get("content") != TURN_ANSWER:
            return "turn: unexpected answer"
        return None


def _event_kind(event: dict[str, Any]) -> str | None:
    """The event field set in a StreamTurnResponse's JSON."""
    return next((kind for kind in EVENT_KINDS if kind in event), None)


async def _worker(
    target: str, server: Server, index: int, stack: AsyncExitStack, echo_replies: int
) -> Worker:
    """A client of `target` on a connection of its own, closed with `stack`."""
    if target == "connect":
        if server.http_address is None:
            raise RuntimeError(f"the {server.name} server has no HTTP listener")
        return ConnectWorker(await _connect.own_client(stack, server.http_address), f"c{index}")
    channel = grpc.aio.insecure_channel(server.address, options=OWN_CONNECTION)
    await stack.enter_async_context(channel)
    if target.startswith("echo"):
        return EchoWorker(channel, echo_replies)
    return ChatWorker(channel, f"w{index}")


async def run_round(target: str, server: Server, config: Config) -> Phase:
    """Warm up, prepare and measure `target` with fresh connections."""
    async with AsyncExitStack() as stack:
        workers = [
            await _worker(target, server, index, stack, config.echo_replies)
            for index in range(config.clients)
        ]
        return await warm_and_measure(
            workers, server.cpu_seconds, warmup=config.warmup, seconds=config.seconds
        )


@dataclass(slots=True)
class Figures(Rounds):
    """A target's figures over all rounds: median throughput, pooled latency percentiles."""

    def ratio(self, echo: Figures) -> float:
        """Median over the rounds of this target's throughput over the echo's in that round."""
        pairs = zip(self.per_s, echo.per_s, strict=True)
        return statistics.median(mine / theirs for mine, theirs in pairs)

    def summary(self, echo: Figures) -> dict[str, Any]:
        """The figures as plain data."""
        return {
            "calls": self.calls,
            "failures": self.failures,
            "calls_per_s": statistics.median(self.per_s),
            "rounds_calls_per_s": self.per_s,
            "p50_ms": self.percentile_ms(0.5),
            "p99_ms": self.percentile_ms(0.99),
            "ratio_vs_echo": self.ratio(echo),
            "server_cpu": statistics.median(self.server_cores) if self.server_cores else None,
            "client_cpu": statistics.median(self.client_cores),
            "server_cpu_us_per_call": self.median_cpu_us(),
        }

    def median_cpu_us(self) -> float | None:
        """Median over the rounds of the server's CPU microseconds per call."""
        return statistics.median(self.cpu_us) if self.cpu_us else None


def server_commands(
    state_dir: Path, echo_replies: int = len(_echo.REPLIES)
) -> dict[str, list[str]]:
    """The command line of every target's server, its state under `state_dir` (created);
    the echo streams `echo_replies` replies per call."""
    for name in ("memory", "sqlite"):
        (state_dir / name).mkdir(parents=True, exist_ok=True)
    serve = [sys.executable, "-m", "agentskit_chat.cli", "serve"]  # a log line per turn
    serve += ["--listen", "127.0.0.1:0", "--definitions", str(DEFINITIONS), "--drain-delay", "0"]
    memory = [*serve, "--store", "memory://", "--state-dir", str(state_dir / "memory")]
    # An HTTP listener too: the Connect target's turns go there.
    memory += ["--http-listen", "127.0.0.1:0"]
    echo = [sys.executable, "-m", "bench._echo", "--listen", "127.0.0.1:0"]
    echo += ["--replies", str(echo_replies)]
    return {
        "echo": echo,
        "echo-traced": [*echo, "--traced"],
        "memory": memory,
        "sqlite": [
            *serve,
            "--store",
            f"sqlite:{state_dir / 'sqlite' / 'sessions.db'}",
            "--state-dir",
            str(state_dir / "sqlite"),
        ],
    }


def telemetry_env(env: dict[str, str], collector: str) -> dict[str, str]:
    """`env` with OTLP export of spans and metrics to `collector`, default batching."""
    return {
        **env,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{collector}",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_METRIC_EXPORT_INTERVAL": "1000",
    }


async def run(config: Config) -> tuple[dict[str, Figures], bool]:
    """Start the collector, then measure round by round, each target on a new server.

    Returns the figures and whether servers and load ran on CPUs of their own.
    """
    figures = {target: Figures(target) for target in TARGETS}
    env = bench_env()
    async with AsyncExitStack() as stack:
        state_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="chat-bench-")))
        server_cpus, load_cpus = placed(stack, config.pin)
        collector = await stack.enter_async_context(_servers.collector(env, load_cpus))
        for number in range(config.rounds):
            commands = server_commands(state_dir / f"round-{number}", config.echo_replies)
            for target in TARGETS:
                if target in GUESTS:
                    continue
                own = telemetry_env(env, collector.address) if target == "echo-traced" else env
                server = running(target, commands[target], cwd=ROOT, env=own, cpus=server_cpus)
                guests = [guest for guest, host in GUESTS.items() if host == target]
                order = [target, *guests] if number % 2 == 0 else [*guests, target]
                async with server as started:
                    for name in order:
                        figures[name].add(await run_round(name, started, config))
    return figures, server_cpus is not None


def _cpu(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def report(
    figures: dict[str, Figures], config: Config, *, quick: bool, pinned: bool
) -> dict[str, Any]:
    """Print the table and the goal line; the figures as plain data."""
    data = {name: f.summary(figures["echo"]) for name, f in figures.items()}
    where = "servers on their own CPU" if pinned else "placement left to the scheduler"
    print(
        f"\nService throughput: {config.clients} concurrent clients, "
        f"{config.rounds} round(s) x {config.seconds:g} s per target "
        f"({os.cpu_count()} CPUs, {where}; Python {platform.python_version()}, "
        f"grpcio {grpc.__version__})"
    )
    print(
        f"  {'target':<12} {'calls/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'vs echo':>8}"
        f" {'server CPU':>11} {'CPU us/call':>12} {'client CPU':>11}"
    )
    for name, row in data.items():
        print(
            f"  {name:<12} {row['calls_per_s']:>10,.0f} {row['p50_ms']:>8.2f}"
            f" {row['p99_ms']:>8.2f} {row['ratio_vs_echo']:>7.2f}x"
            f" {_cpu(row['server_cpu']):>11} {_us(row['server_cpu_us_per_call']):>12}"
            f" {_cpu(row['client_cpu']):>11}"
        )
    verdicts = []
    for name, goal in GOALS.items():
        ratio = data[name]["ratio_vs_echo"]
        verdicts.append(
            f"{name} {ratio:.2f}x echo (goal >= {goal}x): {'met' if ratio >= goal else 'MISSED'}"
        )
    print(
        "  calls/s: median round; vs echo: median of same-round ratios; p50/p99: every call;"
        " server CPU: share of one core; CPU us/call: median round"
    )
    floor = tracing_floor(figures)
    if floor is not None:
        data["echo-traced"]["interceptor_us_per_call"] = floor[0]
        data["echo-traced"]["bound_from_interceptor"] = floor[1]
        print(
            f"  tracing interceptor alone: {floor[0]:+,.0f} us CPU per call on the echo; at"
            f" that cost alone a turn runs at {floor[1]:.2f}x telemetry off"
        )
    connect = figures["connect"].ratio(figures["memory"])
    data["connect"]["ratio_vs_grpc"] = connect
    cpu = figures["connect"].median_cpu_us(), figures["memory"].median_cpu_us()
    cost = None if cpu[0] is None or cpu[1] is None else cpu[0] / cpu[1]
    data["connect"]["server_cpu_vs_grpc"] = cost
    print(
        f"  connect: Connect JSON turns over HTTP/1.1 at {connect:.2f}x the gRPC turns of the"
        f" same server (memory), same round; server CPU per turn {_ratio(cost)} gRPC's"
    )
    met = all(data[name]["ratio_vs_echo"] >= goal for name, goal in GOALS.items())
    note = " (--quick: too few samples to trust)" if quick else ""
    print(f"Goals{note}: {'; '.join(verdicts)} -> {'all met' if met else 'not all met'}")
    latency = latency_figures(data, config)
    print(
        f"Latency{note}: sqlite turn p50 {latency['sqlite_p50_ms']:.2f} ms, echo"
        f" ({config.echo_replies} replies) p50 {latency['echo_p50_ms']:.2f} ms:"
        f" {latency['ratio']:.3f}x the echo's, {config.clients} client(s)"
        + (
            f" (goal <= {LATENCY_GOAL}x: {'met' if latency['goal_met'] else 'MISSED'})"
            if latency["goal_met"] is not None
            else f" (the goal, <= {LATENCY_GOAL}x, is for one client: --clients 1)"
        )
    )
    return {
        "config": asdict(config),
        "pinned": pinned,
        "targets": data,
        "goals": GOALS,
        "goals_met": met,
        "latency": latency,
    }


def latency_figures(data: dict[str, Any], config: Config) -> dict[str, Any]:
    """The SQLite turn's p50 over the echo's (every call of every round pooled); the
    latency goal's verdict only with one client (else None)."""
    echo, sqlite = data["echo"]["p50_ms"], data["sqlite"]["p50_ms"]
    ratio = sqlite / echo
    return {
        "clients": config.clients,
        "echo_replies": config.echo_replies,
        "echo_p50_ms": echo,
        "sqlite_p50_ms": sqlite,
        "ratio": ratio,
        "goal": LATENCY_GOAL,
        "goal_met": ratio <= LATENCY_GOAL if config.clients == 1 else None,
    }


def tracing_floor(figures: dict[str, Figures]) -> tuple[float, float] | None:
    """(extra CPU µs per call of the traced echo, the ratio a turn keeps at that cost).

    The traced echo pays only for the gRPC server interceptor, its SERVER span, its call
    duration and their export, the part of telemetry that no turn can avoid.
    """
    echo, traced, off = (
        figures[name].median_cpu_us() for name in ("echo", "echo-traced", "memory")
    )
    if echo is None or traced is None or off is None:
        return None
    extra = traced - echo
    return extra, off / (off + max(extra, 0.0))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table; 1 when any call failed, else 0."""
    parser = argparse.ArgumentParser(description=__doc__)
    _cli.add_run_options(parser, rounds=FULL.rounds)
    parser.add_argument(
        "--seconds", type=float, help=f"measured seconds per round [{FULL.seconds}]"
    )
    parser.add_argument("--clients", type=int, help=f"concurrent clients [{FULL.clients}]")
    _cli.add_output_options(parser)
    parser.add_argument(
        "--echo-replies",
        type=int,
        choices=sorted(_echo.REPLY_SETS),
        default=len(_echo.REPLIES),
        help="replies per echo call: 4 like a turn's messages, or 2 [%(default)s]",
    )
    parser.add_argument("--warmup", type=float, help=f"warm-up seconds per round [{FULL.warmup}]")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    config = Config(
        **_cli.load_from(args, base),
        pin=not args.no_pin,
        echo_replies=args.echo_replies,
    )
    figures, pinned = asyncio.run(run(config))
    data = report(figures, config, quick=args.quick, pinned=pinned)
    return _cli.finish(data, args.json, *failures_of(figures.values()), "calls")


if __name__ == "__main__":
    raise SystemExit(main())
