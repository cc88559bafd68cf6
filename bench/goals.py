"""The turn's speed and telemetry goals, run N times, in one table.

`python -m bench.goals [--runs 3] [--quick] [--json PATH]` runs, N times over, the
benchmarks behind the goals, each as a child process (`python -m bench.NAME ... --json
FILE`, its own table printed as it goes), and then prints one table: each goal, its
target, each run's figure, the range over the runs, and whether the goal was met.

- one-client SQLite turn p50 over the echo's (4 replies): `bench.service --clients 1`,
  its `latency.ratio`;
- a LangGraph turn over the service's, both at `synchronous=normal`: `bench.peer`, `ratio`;
- the LangGraph server (`langgraph dev`) against `serve` over gRPC at 1 and 16 clients:
  `bench.server_peer --clients 1 16`, its `ratios.grpc` (16-client throughput and server
  CPU per turn, one-client p50; it needs build/langgraph-env, which `make bench-goals` makes);
- `serve`'s server CPU per SQLite turn over the echo's, the in-process turn's and 150 us:
  `bench.floor --rounds 3` (at one client);
- two workers' throughput over one's at 64 clients: `bench.workers --clients 64`,
  `throughput_ratio`;
- PostgreSQL's service CPU per turn over SQLite's: `bench.stores`, the median of its
  same-round ratios;
- metrics only, one trace in ten, every turn traced, and traced with `--rpc-spans off`,
  each over telemetry off: `bench.telemetry`, each setting's `ratio_vs_off`.

The targets are the same as each module's own goal line.

Durations: to keep a run to about five minutes on two cores (estimated from each
benchmark's rounds and start-up; a run's seconds per benchmark are printed under the table),
the service benchmark runs 3 rounds of 2 s instead of 5 (at one client, each target's p50
pools about a thousand calls a round), the stores benchmark 3 rounds of 2 s instead of 5
of 3 s (its PostgreSQL cluster takes half a minute to start), and the telemetry benchmark
16 short rounds instead of 24 (its ratios are medians over the rounds, so fewer rounds
widen their quartiles but do not bias them); the peer comparison runs its full length
(under a minute). Each module's own defaults, as `make bench` runs them, take longer; the
spread over the runs is what this table is for. `--quick` passes each module's `--quick`
instead: a smoke run whose figures mean nothing. A goal is `met` when every run meets it,
`missed` when none does, and `k/N` when k of the N runs do.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ._turns import ROOT

Figure = Callable[[dict[str, Any]], float | None]


@dataclass(frozen=True, slots=True)
class Bench:
    """A benchmark module, the arguments of a goals run, and those of a smoke run."""

    module: str
    arguments: tuple[str, ...]
    quick: tuple[str, ...]


BENCHES: Final = {
    "service": Bench(
        "bench.service", ("--clients", "1", "--rounds", "3", "--seconds", "2"), ("--clients", "1")
    ),
    "peer": Bench("bench.peer", (), ()),
    "stores": Bench("bench.stores", ("--rounds", "3", "--seconds", "2"), ()),
    "telemetry": Bench("bench.telemetry", ("--rounds", "16"), ()),
    "server_peer": Bench("bench.server_peer", ("--clients", "1", "16"), ()),
    "floor": Bench("bench.floor", ("--rounds", "3"), ()),
    "workers": Bench("bench.workers", ("--clients", "64", "--rounds", "3"), ()),
}


@dataclass(frozen=True, slots=True)
class Goal:
    """A goal: what it compares, its bound, the benchmark that measures it, and its figure."""

    name: str
    at_most: bool
    bound: float
    bench: str
    figure: Figure

    @property
    def target(self) -> str:
        return f"{'<=' if self.at_most else '>='} {self.bound}x"

    def format(self, value: float | None) -> str:
        """A figure to three decimals (a bound's own precision, and one more)."""
        return "-" if value is None else f"{value:.3f}"

    def met(self, value: float) -> bool:
        return value <= self.bound if self.at_most else value >= self.bound


def _median_of(key: str) -> Figure:
    def figure(data: dict[str, Any]) -> float | None:
        values = data.get(key) or []
        return statistics.median(values) if values else None

    return figure


def _server_peer(clients: int, ratio: str) -> Figure:
    def figure(data: dict[str, Any]) -> float | None:
        value = data["ratios"]["grpc"][str(clients)][ratio]
        return None if value is None else float(value)

    return figure


def _floor(data: dict[str, Any]) -> float | None:
    """`serve`'s CPU per SQLite turn over the echo's + the in-process turn's + 150 us."""
    row = data["stores"]["sqlite"]
    if row["serve_us"] is None or data["echo_us"] is None:
        return None
    return float(row["serve_us"]) / float(data["echo_us"] + row["in_process_us"] + 150.0)


def _telemetry(setting: str) -> Figure:
    def figure(data: dict[str, Any]) -> float | None:
        value = data["settings"][setting]["ratio_vs_off"]
        return float(value)

    return figure


GOALS: Final = (
    Goal(
        "1-client SQLite p50 / echo p50",
        True,
        2.0,
        "service",
        lambda data: float(data["latency"]["ratio"]),
    ),
    Goal("LangGraph turn / service turn", False, 2.5, "peer", lambda data: float(data["ratio"])),
    Goal(
        "16 clients turns/s / LG server's",
        False,
        8.0,
        "server_peer",
        _server_peer(16, "throughput"),
    ),
    Goal("LG server CPU/turn / gRPC's, 16", False, 8.0, "server_peer", _server_peer(16, "cpu")),
    Goal("LG server 1-client p50 / gRPC's", False, 100.0, "server_peer", _server_peer(1, "p50")),
    Goal("turn CPU / (echo+in-proc+150us)", True, 1.0, "floor", _floor),
    Goal(
        "PostgreSQL CPU/turn / SQLite's",
        True,
        1.15,
        "stores",
        _median_of("postgresql_over_sqlite_cpu"),
    ),
    Goal(
        "2 workers / 1, 64 clients turns/s",
        False,
        1.7,
        "workers",
        lambda data: float(data["throughput_ratio"]),
    ),
    Goal("metrics only / off", False, 0.95, "telemetry", _telemetry("metrics")),
    Goal("1 trace in 10 / off", False, 0.90, "telemetry", _telemetry("sampled")),
    Goal("every turn traced / off", False, 0.75, "telemetry", _telemetry("traced")),
    Goal("traced, rpc spans off / off", False, 0.80, "telemetry", _telemetry("traced-mesh")),
)


@dataclass(slots=True)
class Outcome:
    """One benchmark's run: its exit status, seconds taken and JSON figures (None if absent)."""

    status: int
    seconds: float
    data: dict[str, Any] | None


def run_bench(bench: Bench, *, quick: bool, scratch: Path) -> Outcome:
    """Run `bench` as a child process, its output passed through; read its JSON."""
    out = scratch / f"{bench.module}.json"
    out.unlink(missing_ok=True)
    argv = [sys.executable, "-m", bench.module, *(bench.quick if quick else bench.arguments)]
    argv += ["--quick"] if quick else []
    print(f"\n$ {' '.join(argv[1:])}", flush=True)
    start = time.perf_counter()
    status = subprocess.run([*argv, "--json", str(out)], cwd=ROOT, check=False).returncode
    seconds = time.perf_counter() - start
    data = json.loads(out.read_text()) if out.exists() else None
    return Outcome(status, seconds, data)


def figures(goal: Goal, outcome: Outcome) -> float | None:
    """The goal's figure from its benchmark's outcome; None when it has none."""
    if outcome.data is None:
        return None
    try:
        return goal.figure(outcome.data)
    except (KeyError, TypeError, ValueError):
        return None


def verdict(goal: Goal, values: Sequence[float | None]) -> str:
    """`met` in every run, `missed` in none, `k/N` in between; `-` without any figure."""
    known = [value for value in values if value is not None]
    if not known:
        return "-"
    met = sum(goal.met(value) for value in known)
    if met == len(values):
        return "met"
    return "missed" if met == 0 else f"{met}/{len(values)}"


def report(runs: list[dict[str, Outcome]], *, quick: bool) -> list[dict[str, Any]]:
    """Print the goals table; its rows as plain data."""
    heads = [f"run {number}" for number in range(1, len(runs) + 1)]
    note = " (--quick: smoke run, the figures mean nothing)" if quick else ""
    print(f"\nGoals over {len(runs)} run(s){note}")
    print(
        f"  {'goal':<31} {'target':>8} "
        + " ".join(f"{head:>7}" for head in heads)
        + f" {'range':>13}  verdict"
    )
    rows = []
    for goal in GOALS:
        values = [figures(goal, run[goal.bench]) for run in runs]
        known = [value for value in values if value is not None]
        span = f"{goal.format(min(known))}-{goal.format(max(known))}" if known else "-"
        cells = " ".join(f"{goal.format(value):>7}" for value in values)
        mark = verdict(goal, values)
        print(f"  {goal.name:<31} {goal.target:>8} {cells} {span:>13}  {mark}")
        rows.append({"goal": goal.name, "target": goal.target, "runs": values, "verdict": mark})
    for number, run in enumerate(runs, 1):
        times = ", ".join(f"{name} {o.seconds:.0f} s" for name, o in run.items())
        failed = [name for name, o in run.items() if o.status != 0 or o.data is None]
        warning = f"; FAILED or INVALID: {', '.join(failed)}" if failed else ""
        print(f"  run {number}: {times}{warning}")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Run the goal benchmarks `--runs` times; 1 when any of them failed, else 0."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="runs [%(default)s]")
    parser.add_argument("--quick", action="store_true", help="each benchmark's smoke run")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    runs: list[dict[str, Outcome]] = []
    with tempfile.TemporaryDirectory(prefix="chat-goals-") as scratch:
        for _ in range(args.runs):
            runs.append(
                {
                    name: run_bench(bench, quick=args.quick, scratch=Path(scratch))
                    for name, bench in BENCHES.items()
                }
            )
    rows = report(runs, quick=args.quick)
    if args.json is not None:
        args.json.write_text(json.dumps({"quick": args.quick, "goals": rows}, indent=2) + "\n")
    ok = all(o.status == 0 and o.data is not None for run in runs for o in run.values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
