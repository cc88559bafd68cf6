"""The stores benchmark still runs (a smoke run; tests never judge speed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.goals import GOALS
from bench.stores import STORES, main
from tests.postgres import SKIP_ENV, skipped


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or not Path("/proc/self/stat").exists(),
    reason="the benchmark reads CPU time from /proc and places processes by CPU affinity",
)
def test_quick_benchmark_run_measures_every_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if skipped():
        pytest.skip(f"PostgreSQL tests skipped: {SKIP_ENV} is set")
    figures = tmp_path / "stores.json"
    cpus = os.sched_getaffinity(0)
    assert main(["--quick", "--json", str(figures)]) == 0
    rows = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert set(STORES) <= rows
    data = json.loads(figures.read_text())
    for store in STORES:
        assert data[store]["failures"] == 0
        assert data[store]["rounds_turns_per_s"][0] > 0
        assert data[store]["rounds_cpu_us_per_turn"][0] > 0
    assert data["postgresql"]["rounds_db_cpu_us_per_turn"][0] > 0
    assert len(data["postgresql_over_sqlite_cpu"]) == 1
    assert all(goal.figure(data) for goal in GOALS if goal.bench == "stores")
    durability = data["sqlite_full_over_normal"]
    assert durability["full_ms_per_turn"] > 0
    assert durability["normal_ms_per_turn"] > 0
    assert os.sched_getaffinity(0) == cpus
