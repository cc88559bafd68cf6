"""The goals runner: figures read from each benchmark's JSON, the verdict over runs, and a
benchmark that fails or writes no figures shown as such."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench._turns import ROOT
from bench.goals import BENCHES, GOALS, Bench, Outcome, figures, report, run_bench, verdict

LATENCY = next(goal for goal in GOALS if goal.bench == "service")
METRICS = next(goal for goal in GOALS if goal.name.startswith("metrics"))


def test_every_goal_is_measured_by_a_known_benchmark() -> None:
    assert {goal.bench for goal in GOALS} == set(BENCHES)
    assert [goal.target for goal in GOALS] == [
        "<= 2.0x",
        ">= 2.5x",
        ">= 8.0x",
        ">= 8.0x",
        ">= 100.0x",
        "<= 1.0x",
        "<= 1.15x",
        ">= 1.7x",
        ">= 0.95x",
        ">= 0.9x",
        ">= 0.75x",
        ">= 0.8x",
    ]


def test_the_verdict_says_in_how_many_runs_a_goal_was_met() -> None:
    assert verdict(LATENCY, [1.9, 1.95, 2.0]) == "met"
    assert verdict(LATENCY, [2.1, 2.2]) == "missed"
    assert verdict(LATENCY, [1.9, 2.2, None]) == "1/3"
    assert verdict(METRICS, [0.96, 0.94]) == "1/2"
    assert verdict(LATENCY, [None]) == "-"


def test_figures_come_from_each_benchmarks_json() -> None:
    stores = next(goal for goal in GOALS if goal.bench == "stores")
    assert figures(LATENCY, Outcome(0, 1.0, {"latency": {"ratio": 2.5}})) == 2.5
    assert figures(stores, Outcome(0, 1.0, {"postgresql_over_sqlite_cpu": [1.3, 1.1, 1.2]})) == 1.2
    assert figures(stores, Outcome(0, 1.0, {"postgresql_over_sqlite_cpu": []})) is None
    assert (
        figures(METRICS, Outcome(0, 1.0, {"settings": {"metrics": {"ratio_vs_off": 0.9}}})) == 0.9
    )
    assert figures(METRICS, Outcome(1, 1.0, None)) is None
    peer = [goal for goal in GOALS if goal.bench == "server_peer"]
    ratios = {"1": {"p50": 300.0}, "16": {"throughput": 7.5, "cpu": 9.0}}
    assert [figures(goal, Outcome(0, 1.0, {"ratios": {"grpc": ratios}})) for goal in peer] == [
        7.5,
        9.0,
        300.0,
    ]
    floor = next(goal for goal in GOALS if goal.bench == "floor")
    breakdown = {
        "echo_us": 500.0,
        "stores": {"sqlite": {"serve_us": 1_300.0, "in_process_us": 650}},
    }
    assert figures(floor, Outcome(0, 1.0, breakdown)) == 1.0
    workers = next(goal for goal in GOALS if goal.bench == "workers")
    assert figures(workers, Outcome(0, 1.0, {"throughput_ratio": 1.4})) == 1.4
    assert figures(METRICS, Outcome(0, 1.0, {"targets": {}})) is None


def test_a_benchmark_that_fails_shows_no_figure_and_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = run_bench(Bench("bench.no_such_benchmark", (), ()), quick=False, scratch=tmp_path)
    assert outcome.status != 0
    assert outcome.data is None
    runs = [dict.fromkeys(BENCHES, outcome)]
    rows = report(runs, quick=False)
    assert all(row["runs"] == [None] and row["verdict"] == "-" for row in rows)
    assert "FAILED or INVALID: service, peer, stores, telemetry" in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(BENCHES))
def test_each_benchmark_accepts_the_options_the_runner_passes(name: str, tmp_path: Path) -> None:
    bench = BENCHES[name]
    for options in (bench.arguments, (*bench.quick, "--quick")):
        # argparse checks every option before `--help`, which then exits 0 without running.
        argv = [sys.executable, "-m", bench.module, *options, "--json", str(tmp_path), "--help"]
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
