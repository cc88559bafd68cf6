"""The worker benchmark still runs (a smoke run; tests never judge speed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.workers import main


@pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="the benchmark reads CPU time from /proc"
)
def test_quick_benchmark_run_measures_one_and_two_workers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    figures = tmp_path / "workers.json"
    assert main(["--quick", "--json", str(figures)]) == 0
    out = capsys.readouterr().out
    assert "workers-1" in out
    assert "workers-2" in out
    data = json.loads(figures.read_text())
    for name in ("workers-1", "workers-2"):
        target = data["targets"][name]
        assert target["turns"] > 0
        assert target["failures"] == 0
        assert target["server_cpu_us_per_turn"] > 0
    assert data["cpu_per_turn_ratio"] > 0
