"""Telemetry's price: deterministic turns with each telemetry setting over telemetry off.

One `serve --store memory://` per setting, all started at the outset and kept running:
telemetry off; metrics only (OTLP, no spans); one trace in ten (parent-based ratio sampler)
with metrics; every turn traced with metrics; and every turn traced with `--rpc-spans off`
(the RPC SERVER span left to a mesh proxy). Every server runs pinned to one core (`taskset
-c`, or the same affinity set before exec where there is no taskset); this load process and
the OTLP collector process run on the other cores, so a server never competes with the load
for its core. Each round measures every setting once, in an order rotated from round to
round (each setting comes first, second... equally often), after a short warm-up of its
own (each server keeps its clients' connections from round to round, so no round pays for
connecting); a setting's figure for a round is its throughput over telemetry off's in that
same round, so drift on a shared machine (other processes, frequency changes) cancels in
the ratio. Many short rounds rather than a few long ones: a burst of someone else's work
spoils one short measurement, and the median over the rounds leaves it out. The table gives
the median of the per-round ratios and their interquartile range.

Why both ratios are printed: the throughput ratio is the goal's measure, and it is sound only
while every server keeps its core busy (the table shows each server's share of its core);
when something else takes the server's core or the load process falls behind, throughput
says more about the machine than about telemetry, and the ratio of server CPU per turn
(telemetry off's over the setting's) is the figure to trust. Metrics are exported every
`--metric-interval` seconds (60, the SDK's default: a shorter interval measures the export
rather than the turn; `--metric-interval 1` shows what that costs).
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

from . import _cli, _servers
from ._servers import Server, bench_env, placed, running
from ._turns import (
    DEFINITIONS,
    OWN_CONNECTION,
    ROOT,
    ChatWorker,
    Load,
    Phase,
    Rounds,
    failures_of,
    percentile_ms,
    warm_and_measure,
)

OFF: Final = "off"
SETTINGS: Final = ("off", "metrics", "sampled", "traced", "traced-mesh")
DESCRIPTIONS: Final = {
    "off": "telemetry off",
    "metrics": "metrics only",
    "sampled": "one trace in ten, metrics",
    "traced": "every turn traced, metrics",
    "traced-mesh": "every turn traced, --rpc-spans off",
}
GOALS: Final = {"metrics": 0.95, "sampled": 0.90, "traced": 0.75, "traced-mesh": 0.80}
"""Each setting's throughput over telemetry off's, same round, at least."""
SAMPLED: Final = {
    "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
    "OTEL_TRACES_SAMPLER_ARG": "0.1",
}
BUSY: Final = 0.9
"""A server's share of its core below which its throughput is not its own limit."""


@dataclass(frozen=True, slots=True)
class Config(Load):
    """Clients, rounds, seconds of warm-up and measurement per setting and round."""

    metric_interval: float
    pin: bool = True


FULL = Config(clients=16, rounds=24, seconds=1.0, warmup=0.2, metric_interval=60.0)
QUICK = Config(clients=8, rounds=2, seconds=0.3, warmup=0.1, metric_interval=60.0)


def serve_command(state_dir: Path, setting: str) -> list[str]:
    """`serve` on the memory store (log line per turn at the default level)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "agentskit_chat.cli", "serve", "--listen", "127.0.0.1:0"]
    argv += ["--definitions", str(DEFINITIONS), "--drain-delay", "0"]
    argv += ["--store", "memory://", "--state-dir", str(state_dir)]
    return [*argv, "--rpc-spans", "off" if setting == "traced-mesh" else "on"]


def setting_env(
    env: dict[str, str], setting: str, collector: str, metric_interval: float
) -> dict[str, str]:
    """`env` with the OTLP export `setting` asks for, to `collector`."""
    if setting == OFF:
        return env
    own = {
        **env,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{collector}",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_METRIC_EXPORT_INTERVAL": str(int(metric_interval * 1000)),
    }
    if setting == "metrics":
        own["OTEL_TRACES_EXPORTER"] = "none"
    if setting == "sampled":
        own.update(SAMPLED)
    return own


@dataclass(slots=True)
class Figures(Rounds):
    """One setting over all rounds."""

    def throughput_ratios(self, off: Figures) -> list[float]:
        """This setting's throughput over telemetry off's, round by round."""
        return [mine / theirs for mine, theirs in zip(self.per_s, off.per_s, strict=True)]

    def cpu_ratios(self, off: Figures) -> list[float]:
        """Telemetry off's server CPU per turn over this setting's, round by round."""
        return [theirs / mine for mine, theirs in zip(self.cpu_us, off.cpu_us, strict=True)]


def rotation(rounds: int) -> list[tuple[str, ...]]:
    """The settings' order in each round: rotated by one each round."""
    count = len(SETTINGS)
    return [tuple(SETTINGS[(start + i) % count] for i in range(count)) for start in range(rounds)]


async def clients_of(server: Server, config: Config, stack: AsyncExitStack) -> list[ChatWorker]:
    """`config.clients` clients of `server`, each on a connection of its own (closed with
    `stack`), kept for every round so no round pays for connecting."""
    workers = []
    for index in range(config.clients):
        channel = grpc.aio.insecure_channel(server.address, options=OWN_CONNECTION)
        await stack.enter_async_context(channel)
        workers.append(ChatWorker(channel, f"{server.name}-{index}"))
    return workers


async def measure_setting(server: Server, workers: list[ChatWorker], config: Config) -> Phase:
    """A short warm-up (the server sat idle while the others were measured), then a
    measured phase."""
    return await warm_and_measure(
        workers, server.cpu_seconds, warmup=config.warmup, seconds=config.seconds
    )


async def run(config: Config) -> tuple[dict[str, Figures], bool]:
    """Start the collector and every setting's server, then measure round by round.

    Returns the figures and whether servers and load ran on CPUs of their own.
    """
    figures = {setting: Figures(setting) for setting in SETTINGS}
    env = bench_env()
    async with AsyncExitStack() as stack:
        state_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="chat-otel-")))
        server_cpus, load_cpus = placed(stack, config.pin)
        collector = await stack.enter_async_context(_servers.collector(env, load_cpus))
        servers: dict[str, tuple[Server, list[ChatWorker]]] = {}
        for setting in SETTINGS:
            own = setting_env(env, setting, collector.address, config.metric_interval)
            argv = serve_command(state_dir / setting, setting)
            server = await stack.enter_async_context(
                running(setting, argv, cwd=ROOT, env=own, cpus=server_cpus)
            )
            servers[setting] = server, await clients_of(server, config, stack)
        for order in rotation(config.rounds):
            for setting in order:
                figures[setting].add(await measure_setting(*servers[setting], config))
    return figures, server_cpus is not None


def quartiles(values: Sequence[float]) -> tuple[float, float]:
    """The first and third quartiles (the middle half of the rounds lies between)."""
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    first, _, third = statistics.quantiles(values, n=4, method="inclusive")
    return first, third


def _range(values: Sequence[float]) -> str:
    if not values:
        return "-"
    first, third = quartiles(values)
    return f"{first:.3f}-{third:.3f}"


def report(
    figures: dict[str, Figures], config: Config, *, quick: bool, pinned: bool
) -> dict[str, Any]:
    """Print the table and the goal line; the figures as plain data."""
    off = figures[OFF]
    where = "servers pinned to one core, load elsewhere" if pinned else "placement unpinned"
    one, five, _ = os.getloadavg()
    print(
        f"\nTelemetry's price: {config.clients} clients, {config.rounds} interleaved round(s) x"
        f" {config.seconds:g} s per setting, metrics exported every {config.metric_interval:g} s"
        f" ({os.cpu_count()} CPUs, {where}; load average {one:.2f}/{five:.2f} at the end;"
        f" Python {platform.python_version()})"
    )
    print(
        f"  {'setting':<12} {'turns/s':>8} {'p50 ms':>7} {'server core':>11} {'CPU us/turn':>11}"
        f" {'vs off':>7} {'IQR':>11} {'CPU vs off':>10} {'IQR':>11}  goal"
    )
    data: dict[str, Any] = {}
    verdicts: list[str] = []
    met = True
    for name, row in figures.items():
        throughput, cpu = row.throughput_ratios(off), row.cpu_ratios(off)
        ratio = statistics.median(throughput)
        cpu_ratio = statistics.median(cpu) if cpu else None
        busy = statistics.median(row.server_cores) if row.server_cores else None
        cpu_us = statistics.median(row.cpu_us) if row.cpu_us else None
        goal = GOALS.get(name)
        data[name] = {
            "description": DESCRIPTIONS[name],
            "calls": row.calls,
            "failures": row.failures,
            "turns_per_s": statistics.median(row.per_s),
            "p50_ms": percentile_ms(row.latencies, 0.5),
            "server_core_share": busy,
            "server_cpu_us_per_turn": cpu_us,
            "ratio_vs_off": ratio,
            "rounds_ratio_vs_off": throughput,
            "cpu_ratio_vs_off": cpu_ratio,
            "rounds_cpu_ratio_vs_off": cpu,
            "goal": goal,
        }
        mark = ""
        if goal is not None:
            ok = ratio >= goal
            met = met and ok
            mark = f">= {goal}: {'met' if ok else 'MISSED'}"
            verdicts.append(f"{name} {ratio:.3f}x ({mark})")
        print(
            f"  {name:<12} {data[name]['turns_per_s']:>8,.0f} {data[name]['p50_ms']:>7.2f}"
            f" {'-' if busy is None else f'{busy:.0%}':>11}"
            f" {'-' if cpu_us is None else f'{cpu_us:,.0f}':>11} {ratio:>6.3f}x"
            f" {_range(throughput):>11} {'-' if cpu_ratio is None else f'{cpu_ratio:.3f}x':>10}"
            f" {_range(cpu):>11}  {mark}"
        )
    idle = [name for name, row in data.items() if (row["server_core_share"] or 1.0) < BUSY]
    print(
        "  vs off: median of same-round throughput ratios; CPU vs off: telemetry off's server"
        " CPU per turn over the setting's, median of rounds; IQR: the middle half of the rounds"
    )
    if idle:
        print(
            f"  note: {', '.join(idle)} kept their core busy less than {BUSY:.0%} of the time;"
            " their throughput was limited elsewhere (trust the CPU ratio)"
        )
    note = " (--quick: too few samples to trust)" if quick else ""
    print(f"Goals{note}: {'; '.join(verdicts)} -> {'all met' if met else 'not all met'}")
    return {
        "config": asdict(config),
        "pinned": pinned,
        "settings": data,
        "goals": GOALS,
        "goals_met": met,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table; 1 when any turn failed, else 0."""
    parser = argparse.ArgumentParser(description=__doc__)
    _cli.add_run_options(parser, rounds=FULL.rounds)
    parser.add_argument("--seconds", type=float, help=f"seconds per setting [{FULL.seconds}]")
    parser.add_argument("--clients", type=int, help=f"concurrent clients [{FULL.clients}]")
    parser.add_argument(
        "--metric-interval",
        type=float,
        help=f"seconds between metric exports [{FULL.metric_interval:g}]",
    )
    _cli.add_output_options(parser)
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    config = Config(
        **_cli.load_from(args, base),
        metric_interval=args.metric_interval or base.metric_interval,
        pin=not args.no_pin,
    )
    figures, pinned = asyncio.run(run(config))
    data = report(figures, config, quick=args.quick, pinned=pinned)
    return _cli.finish(data, args.json, *failures_of(figures.values()), "turns")


if __name__ == "__main__":
    raise SystemExit(main())
