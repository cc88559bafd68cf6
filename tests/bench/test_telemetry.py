"""The telemetry benchmark still runs (a smoke run; tests never judge speed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.goals import GOALS
from bench.telemetry import SETTINGS, main, rotation


def test_every_setting_takes_every_place_in_the_order_equally_often() -> None:
    orders = rotation(len(SETTINGS))
    for place in range(len(SETTINGS)):
        assert sorted(order[place] for order in orders) == sorted(SETTINGS)


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or not Path("/proc/self/stat").exists(),
    reason="the benchmark reads CPU time from /proc and places processes by CPU affinity",
)
def test_quick_run_measures_every_setting_against_telemetry_off(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    figures = tmp_path / "telemetry.json"
    cpus = os.sched_getaffinity(0)
    assert main(["--quick", "--json", str(figures)]) == 0
    assert "traced-mesh" in capsys.readouterr().out
    data = json.loads(figures.read_text())
    assert set(data["settings"]) == set(SETTINGS)
    for row in data["settings"].values():
        assert row["calls"] > 0
        assert row["failures"] == 0
        assert row["ratio_vs_off"] > 0
        assert row["server_cpu_us_per_turn"] > 0
    assert data["settings"]["off"]["ratio_vs_off"] == 1.0
    assert all(goal.figure(data) for goal in GOALS if goal.bench == "telemetry")
    assert os.sched_getaffinity(0) == cpus  # the load process's own placement is restored
