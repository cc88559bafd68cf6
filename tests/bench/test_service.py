"""The service benchmark still runs (a smoke run; tests never judge speed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.service import main


def test_quick_benchmark_run_measures_every_target(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    figures = tmp_path / "service.json"
    assert main(["--quick", "--json", str(figures)]) == 0
    rows = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert {"echo", "memory", "sqlite"} <= rows
    targets = json.loads(figures.read_text())["targets"]
    for name in ("echo", "memory", "sqlite"):
        assert targets[name]["calls"] > 0
        assert targets[name]["failures"] == 0
