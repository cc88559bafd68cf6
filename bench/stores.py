"""Session stores side by side: deterministic-turn throughput, CPU and latency per turn on
the memory, SQLite (`--sqlite-synchronous normal` and `full`) and PostgreSQL stores, in one
run.

Each round starts, for every store, a new `serve` process (on a CPU of its own when there
are two or more; see bench/_servers.py) and drives `/ping` turns into server-held sessions
from concurrent clients. PostgreSQL is a throwaway cluster on loopback (bench/_postgres.py
starts it, installing the server package when absent), one fresh database per round; it
runs on the load generator's CPUs, so its CPU is not the service's: it is reported on its
own, and added to the service's in the `with db` column.

Goal: PostgreSQL costs at most GOAL x SQLite's service CPU per turn. The machine may be
shared: the table shows every round's figure, and the ratio is the median of same-round
ratios. The durability line gives what a disk sync per commit (`full`) costs a turn over
`normal`: the service's time per turn (1000 / turns per second) in ms and as a ratio,
and the change in median turn latency. The SQLite files
live in the system's temporary directory; on a tmpfs a sync costs nothing, so the line
names the file system.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import grpc

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc

from . import _cli
from ._postgres import Cluster, cluster
from ._servers import Server, bench_env, placed, running

ROOT: Final = Path(__file__).resolve().parents[1]
DEFINITIONS: Final = Path(__file__).resolve().with_name("definitions")
STORES: Final = ("memory", "sqlite", "sqlite-full", "postgresql")
TURNS_PER_SESSION: Final = 50
GOAL: Final = 1.15
"""PostgreSQL's service CPU per turn over SQLite's, at most."""


@dataclass(frozen=True, slots=True)
class Config:
    """Clients, rounds, seconds of warm-up and measurement per store and round; pinning."""

    clients: int = 16
    rounds: int = 5
    seconds: float = 3.0
    warmup: float = 1.0
    pin: bool = True


QUICK: Final = Config(clients=8, rounds=1, seconds=0.5, warmup=0.2)


class Turns:
    """One client: `/ping` turns into server-held sessions, a new one every 50 turns."""

    def __init__(self, channel: grpc.aio.Channel, tag: str) -> None:
        self.stub = chat_pb2_grpc.ChatServiceStub(channel)
        self.tag = tag
        self.serial = 0
        self.session = ""
        self.left = 0
        self.seconds: list[float] = []
        """How long each turn took, from its request to its last event."""

    async def turn(self) -> str | None:
        """One turn to its last event; None when it completed with `pong`."""
        if self.left == 0:
            reply = await self.stub.CreateSession(pb.CreateSessionRequest(definition_id="ping"))
            self.session, self.left = reply.session.session_id, TURNS_PER_SESSION
        self.left -= 1
        self.serial += 1
        request = pb.StreamTurnRequest(
            session_id=self.session,
            turn_id=f"{self.tag}-{self.serial}",
            submit=pb.SubmitOperation(content="/ping"),
        )
        start = time.perf_counter()
        try:
            events = [event async for event in self.stub.StreamTurn(request)]
        except grpc.aio.AioRpcError as exc:
            return f"{exc.code().name} {exc.details()}"
        self.seconds.append(time.perf_counter() - start)
        if not events or events[-1].WhichOneof("event") != "completed":
            return "the turn did not complete"
        return None if events[-1].completed.content == "pong" else "unexpected answer"


@dataclass(slots=True)
class Figures:
    """One store's rounds: turns per second, CPU microseconds per turn, failures."""

    store: str
    per_s: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    db_cpu_us: list[float] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    """Median milliseconds per turn, per round."""
    failures: list[str] = field(default_factory=list)


async def _load(workers: Sequence[Turns], seconds: float, failures: list[str]) -> int:
    until = time.perf_counter() + seconds
    done = 0

    async def drive(worker: Turns) -> None:
        nonlocal done
        while time.perf_counter() < until:
            problem = await worker.turn()
            done += 1
            if problem is not None:
                failures.append(problem)

    await asyncio.gather(*(drive(worker) for worker in workers))
    return done


def _tree_cpu(pid: int | None) -> float:
    """CPU seconds of process `pid` and its children (a PostgreSQL server's backends)."""
    if pid is None:
        return 0.0
    total = 0.0
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    cpu = Server("db", pid, "").cpu_seconds()
    total += cpu or 0.0
    for child in children:
        total += _tree_cpu(int(child))
    return total


def _postmaster(database: Cluster | None) -> int | None:
    if database is None or database.directory is None:
        return None
    try:
        return int((database.data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


async def measure(
    server: Server, config: Config, figures: Figures, database: Cluster | None
) -> None:
    """Warm up, then measure one round of `server`."""
    async with AsyncExitStack() as stack:
        workers = []
        for index in range(config.clients):
            channel = grpc.aio.insecure_channel(server.address)
            await stack.enter_async_context(channel)
            workers.append(Turns(channel, f"c{index}"))
        await _load(workers, config.warmup, figures.failures)
        postmaster = _postmaster(database)
        for worker in workers:
            worker.seconds.clear()
        cpu_before, db_before = server.cpu_seconds(), _tree_cpu(postmaster)
        start = time.perf_counter()
        turns = await _load(workers, config.seconds, figures.failures)
        elapsed = time.perf_counter() - start
        cpu_after, db_after = server.cpu_seconds(), _tree_cpu(postmaster)
    figures.per_s.append(turns / elapsed)
    seconds = [s for worker in workers for s in worker.seconds]
    if seconds:
        figures.latency_ms.append(statistics.median(seconds) * 1000)
    if cpu_before is not None and cpu_after is not None:
        figures.cpu_us.append((cpu_after - cpu_before) / turns * 1e6)
    if postmaster is not None:
        figures.db_cpu_us.append((db_after - db_before) / turns * 1e6)


def _serve(store: str, state_dir: Path, database: Cluster | None, round_: int) -> list[str]:
    state_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "agentskit_chat.cli", "serve", "--listen", "127.0.0.1:0"]
    argv += ["--definitions", str(DEFINITIONS), "--state-dir", str(state_dir)]
    if store == "memory":
        return [*argv, "--store", "memory://"]
    if store.startswith("sqlite"):
        synchronous = "full" if store == "sqlite-full" else "normal"
        sqlite = ["--store", f"sqlite:{state_dir / 'sessions.db'}"]
        return [*argv, *sqlite, "--sqlite-synchronous", synchronous]
    assert database is not None
    url = database.create_database(f"bench_{round_}_{secrets.token_hex(3)}")
    return [*argv, "--store", url, "--migrate"]


async def run(config: Config) -> tuple[dict[str, Figures], bool]:
    """Every round measures every store on a new server; (figures, pinned)."""
    figures = {store: Figures(store) for store in STORES}
    env = bench_env()
    with ExitStack() as stack:
        server_cpus, _ = placed(stack, config.pin)
        database = stack.enter_context(cluster())  # on the load CPUs, as pinned above
        env["AGENTSKIT_CHAT_STORE_PASSWORD"] = database.password
        env["AGENTSKIT_CHAT_DIGEST_KEY"] = secrets.token_hex(32)
        state = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="stores-bench-")))
        for number in range(config.rounds):
            for store in STORES:
                argv = _serve(store, state / f"{number}-{store}", database, number)
                async with running(store, argv, cwd=ROOT, env=env, cpus=server_cpus) as server:
                    own = database if store == "postgresql" else None
                    await measure(server, config, figures[store], own)
    return figures, server_cpus is not None


def _spread(values: Sequence[float], fmt: str) -> str:
    if not values:
        return "-"
    middle = format(statistics.median(values), fmt)
    if len(values) == 1:
        return middle
    return f"{middle} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def report(figures: dict[str, Figures], config: Config, *, pinned: bool) -> dict[str, Any]:
    """Print the table and the goal line; the figures as plain data."""
    where = "service on its own CPU" if pinned else "placement left to the scheduler"
    print(
        f"\nStores: {config.clients} clients, {config.rounds} round(s) x {config.seconds:g} s"
        f" per store ({os.cpu_count()} CPUs, {where})"
    )
    print(f"  {'store':<11} {'turns/s':>22} {'CPU us/turn':>22} {'with db':>10} {'ms/turn':>20}")
    data: dict[str, Any] = {}
    for name, row in figures.items():
        with_db = [a + b for a, b in zip(row.cpu_us, row.db_cpu_us, strict=False)]
        print(
            f"  {name:<11} {_spread(row.per_s, ',.0f'):>22} {_spread(row.cpu_us, ',.0f'):>22}"
            f" {_spread(with_db, ',.0f') if with_db else '':>10}"
            f" {_spread(row.latency_ms, '.2f'):>20}"
        )
        data[name] = {
            "rounds_turns_per_s": row.per_s,
            "rounds_cpu_us_per_turn": row.cpu_us,
            "rounds_db_cpu_us_per_turn": row.db_cpu_us,
            "rounds_median_ms_per_turn": row.latency_ms,
            "failures": len(row.failures),
        }
    pg, lite = figures["postgresql"].cpu_us, figures["sqlite"].cpu_us
    ratios = [a / b for a, b in zip(pg, lite, strict=True) if b > 0]
    ratio = statistics.median(ratios) if ratios else float("nan")
    data["postgresql_over_sqlite_cpu"] = ratios
    print(
        "  median (min-max) over rounds; CPU: the service process; with db: plus PostgreSQL;"
        f" ms/turn: median turn latency at {config.clients} concurrent clients"
    )
    data["sqlite_full_over_normal"] = durability(figures)
    verdict = "met" if ratio <= GOAL else "MISSED"
    print(
        f"Goal: PostgreSQL {ratio:.2f}x SQLite's CPU per turn"
        f" (rounds {', '.join(f'{r:.2f}' for r in ratios)}; goal <= {GOAL}x): {verdict}"
    )
    data["goal_met"] = ratio <= GOAL
    return data


def durability(figures: dict[str, Figures]) -> dict[str, float]:
    """Print what `--sqlite-synchronous full` costs a turn over `normal`; the figures.

    A turn's cost is the time the service spends per turn at this load, 1000 / (turns/s)
    ms: with every client busy, it is what each turn adds. Same-round pairs, medians.
    """
    normal, full = figures["sqlite"], figures["sqlite-full"]
    pairs = list(zip(normal.per_s, full.per_s, strict=False))
    costs = [(1000 / a, 1000 / b) for a, b in pairs if a > 0 and b > 0]
    latency = list(zip(normal.latency_ms, full.latency_ms, strict=False))
    cpu = [b / a for a, b in zip(normal.cpu_us, full.cpu_us, strict=False) if a > 0]

    def median(values: Sequence[float]) -> float:
        return statistics.median(values) if values else float("nan")

    data = {
        "normal_ms_per_turn": median([a for a, _ in costs]),
        "full_ms_per_turn": median([b for _, b in costs]),
        "extra_ms_per_turn": median([b - a for a, b in costs]),
        "cost_ratio": median([b / a for a, b in costs]),
        "extra_median_latency_ms": median([b - a for a, b in latency]),
        "cpu_ratio": median(cpu),
    }
    print(
        f"Durability: SQLite full (a disk sync per commit, on {_filesystem()}):"
        f" {data['full_ms_per_turn']:.2f} ms per turn against {data['normal_ms_per_turn']:.2f}"
        f" ms with normal ({data['extra_ms_per_turn']:+.2f} ms, {data['cost_ratio']:.2f}x);"
        f" median latency {data['extra_median_latency_ms']:+.2f} ms;"
        f" service CPU {data['cpu_ratio']:.2f}x"
    )
    return data


def _filesystem() -> str:
    """The file system type of the temporary directory, from /proc/mounts; "?" elsewhere."""
    where = Path(tempfile.gettempdir()).resolve()
    best, kind = "", "?"
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return kind
    for line in mounts:
        fields = line.split()
        if len(fields) > 2 and where.is_relative_to(fields[1]) and len(fields[1]) >= len(best):
            best, kind = fields[1], fields[2]
    return kind


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table; 1 when any turn failed, else 0."""
    parser = argparse.ArgumentParser(description=__doc__)
    _cli.add_run_options(parser, rounds=Config().rounds)
    parser.add_argument("--seconds", type=float, help="measured seconds per store and round [3]")
    _cli.add_output_options(parser, unpinned="leave placement to the scheduler")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else Config()
    config = Config(
        clients=base.clients,
        rounds=args.rounds or base.rounds,
        seconds=args.seconds or base.seconds,
        warmup=base.warmup,
        pin=not args.no_pin,
    )
    figures, pinned = asyncio.run(run(config))
    data = report(figures, config, pinned=pinned)
    failures = [problem for row in figures.values() for problem in row.failures]
    return _cli.finish(data, args.json, *_cli.first_of(failures), "turns")


if __name__ == "__main__":
    raise SystemExit(main())
