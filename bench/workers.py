"""Worker processes: deterministic turns on SQLite with `serve --workers 2` and `--workers 1`.

Each round starts a new server for each worker count, on a fresh SQLite database, the
order alternating between rounds, and drives it from this process with one connection
per client (the kernel spreads connections, not calls, over the workers). Server CPU is
that of the whole process tree (the supervising parent and its workers) read from /proc.

The goal: CPU per turn does not grow with the worker count, so throughput is limited by
cores alone. Nothing is pinned: two workers need two cores, and the load generator shares
them, so on a small machine throughput says more about the machine than about the server,
and the CPU per turn is the figure to judge.
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

from . import _cli
from ._servers import Server, bench_env, running
from ._turns import (
    DEFINITIONS,
    OWN_CONNECTION,
    ROOT,
    ChatWorker,
    Load,
    Phase,
    Rounds,
    failures_of,
    warm_and_measure,
)

WORKER_COUNTS: Final = (1, 2)
CPU_GOAL: Final = 1.10
"""CPU per turn with two workers over one worker, at most (a tenth for noise)."""


@dataclass(frozen=True, slots=True)
class Config(Load):
    """Clients, rounds, and seconds of warm-up and measurement per target and round."""


FULL = Config(clients=32, rounds=5, seconds=3.0, warmup=1.0)
QUICK = Config(clients=8, rounds=1, seconds=0.3, warmup=0.2)


def tree_cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds of `pid` and its live descendants; None without /proc."""
    if not Path(f"/proc/{pid}/stat").exists():
        return None
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        total += Server("", current, "").cpu_seconds() or 0.0
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue  # it ended meanwhile
        for task in tasks:
            try:
                children = Path(f"/proc/{current}/task/{task}/children").read_text()
            except OSError:
                continue
            pending.extend(int(child) for child in children.split())
    return total


@dataclass(slots=True)
class Figures(Rounds):
    """One worker count's figures over all rounds."""

    def summary(self) -> dict[str, Any]:
        return {
            "turns": self.calls,
            "failures": self.failures,
            "turns_per_s": statistics.median(self.per_s),
            "rounds_turns_per_s": self.per_s,
            "p50_ms": self.percentile_ms(0.5),
            "p99_ms": self.percentile_ms(0.99),
            "server_cpu_us_per_turn": statistics.median(self.cpu_us) if self.cpu_us else None,
            "rounds_cpu_us_per_turn": self.cpu_us,
            "server_cores": statistics.median(self.server_cores) if self.server_cores else None,
            "client_cores": statistics.median(self.client_cores),
        }


def serve_command(workers: int, state_dir: Path) -> list[str]:
    """`serve` with `workers` processes on a new SQLite database under `state_dir`."""
    state_dir.mkdir(parents=True, exist_ok=True)
    return [
        *(sys.executable, "-m", "agentskit_chat.cli", "serve"),
        *("--listen", "127.0.0.1:0", "--definitions", str(DEFINITIONS)),
        *("--store", f"sqlite:{state_dir / 'sessions.db'}", "--state-dir", str(state_dir)),
        *("--workers", str(workers)),
    ]


async def run_round(server: Server, config: Config) -> Phase:
    """Warm up, prepare sessions and measure, with fresh connections."""
    async with AsyncExitStack() as stack:
        clients: list[ChatWorker] = []
        for index in range(config.clients):
            channel = grpc.aio.insecure_channel(server.address, options=OWN_CONNECTION)
            await stack.enter_async_context(channel)
            clients.append(ChatWorker(channel, f"c{index}"))
        return await warm_and_measure(
            clients,
            lambda: tree_cpu_seconds(server.pid),
            warmup=config.warmup,
            seconds=config.seconds,
        )


async def run(config: Config) -> dict[int, Figures]:
    """Every round measures each worker count on a server of its own."""
    figures = {count: Figures(f"workers-{count}") for count in WORKER_COUNTS}
    env = bench_env()
    with tempfile.TemporaryDirectory(prefix="chat-bench-workers-") as temporary:
        for number in range(config.rounds):
            order = WORKER_COUNTS if number % 2 == 0 else WORKER_COUNTS[::-1]
            for count in order:
                state = Path(temporary) / f"round-{number}-workers-{count}"
                argv = serve_command(count, state)
                async with running(f"workers-{count}", argv, cwd=ROOT, env=env) as server:
                    figures[count].add(await run_round(server, config))
    return figures


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def report(
    figures: dict[int, Figures], config: Config, *, quick: bool, load: tuple[str, str]
) -> dict[str, Any]:
    """Print the table and the goal line; the figures as plain data."""
    data = {f"workers-{count}": f.summary() for count, f in figures.items()}
    print(
        f"\nWorker processes: deterministic turns on SQLite, {config.clients} clients on their"
        f" own connections, {config.rounds} round(s) x {config.seconds:g} s per target"
        f" ({os.cpu_count()} CPUs, load average {load[0]} before and {load[1]} after;"
        f" Python {platform.python_version()})"
    )
    print(
        f"  {'target':<10} {'turns/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'server CPU':>11}"
        f" {'CPU us/turn':>12} {'client CPU':>11}  rounds: CPU us/turn"
    )
    for name, row in data.items():
        cpu = row["server_cpu_us_per_turn"]
        rounds = " ".join(f"{value:,.0f}" for value in row["rounds_cpu_us_per_turn"])
        print(
            f"  {name:<10} {row['turns_per_s']:>9,.0f} {row['p50_ms']:>8.2f}"
            f" {row['p99_ms']:>8.2f} {_cores(row['server_cores']):>11}"
            f" {'-' if cpu is None else f'{cpu:,.0f}':>12} {_cores(row['client_cores']):>11}"
            f"  {rounds}"
        )
    one, two = data["workers-1"], data["workers-2"]
    throughput = two["turns_per_s"] / one["turns_per_s"]
    result: dict[str, Any] = {"config": asdict(config), "load": load, "targets": data}
    result["throughput_ratio"] = throughput
    if one["server_cpu_us_per_turn"] and two["server_cpu_us_per_turn"]:
        cpu = two["server_cpu_us_per_turn"] / one["server_cpu_us_per_turn"]
        result["cpu_per_turn_ratio"] = cpu
        met = cpu <= CPU_GOAL
        result["goal_met"] = met
        note = " (--quick: too few samples to trust)" if quick else ""
        print("  server CPU: cores used by the parent and its workers; CPU us/turn: median round")
        print(
            f"Goal{note}: CPU per turn with 2 workers {cpu:.2f}x 1 worker (goal <= {CPU_GOAL}x):"
            f" {'met' if met else 'MISSED'}; throughput {throughput:.2f}x"
        )
    return result


def _cores(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table; 1 when any turn failed, else 0."""
    parser = argparse.ArgumentParser(description=__doc__)
    _cli.add_run_options(parser, rounds=FULL.rounds)
    parser.add_argument("--seconds", type=float, help=f"seconds per round [{FULL.seconds}]")
    parser.add_argument("--clients", type=int, help=f"concurrent clients [{FULL.clients}]")
    _cli.add_output_options(parser, unpinned=None)
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    config = Config(**_cli.load_from(args, base))
    before = _load()
    figures = asyncio.run(run(config))
    data = report(figures, config, quick=args.quick, load=(before, _load()))
    return _cli.finish(data, args.json, *failures_of(figures.values()), "turns")


if __name__ == "__main__":
    raise SystemExit(main())
