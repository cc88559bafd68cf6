"""The service benchmark still runs (a smoke run; tests never judge speed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.goals import GOALS
from bench.service import main


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or not Path("/proc/self/stat").exists(),
    reason="the benchmark reads CPU time from /proc and places processes by CPU affinity",
)
def test_quick_benchmark_run_measures_every_target(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    figures = tmp_path / "service.json"
    cpus = os.sched_getaffinity(0)
    assert main(["--quick", "--json", str(figures)]) == 0
    rows = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert {"echo", "echo-traced", "memory", "connect", "sqlite"} <= rows
    data = json.loads(figures.read_text())
    targets = data["targets"]
    for name in ("echo", "echo-traced", "memory", "connect", "sqlite"):
        assert targets[name]["calls"] > 0
        assert targets[name]["failures"] == 0
        assert targets[name]["server_cpu_us_per_call"] > 0
    assert data["pinned"] == (len(cpus) >= 2)
    assert os.sched_getaffinity(0) == cpus  # the load generator's own placement is restored
    assert 0 < targets["echo-traced"]["bound_from_interceptor"] <= 1
    assert targets["connect"]["ratio_vs_grpc"] > 0
    assert targets["connect"]["server_cpu_vs_grpc"] > 0
    latency = data["latency"]
    assert latency["echo_replies"] == 4
    assert latency["ratio"] == latency["sqlite_p50_ms"] / latency["echo_p50_ms"] > 0
    assert latency["goal_met"] is None  # the latency goal is judged with one client only
    assert all(goal.figure(data) for goal in GOALS if goal.bench == "service")
