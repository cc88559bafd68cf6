"""The tool round benchmark still runs (a smoke run; tests never judge speed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.tools import PATHS, main


def test_quick_benchmark_run_measures_every_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    figures = tmp_path / "tools.json"
    assert main(["--quick", "--json", str(figures)]) == 0
    assert "Tool round / plain turn" in capsys.readouterr().out
    data = json.loads(figures.read_text())
    for path in PATHS:
        assert data["paths"][path]["failures"] == 0
        assert data["paths"][path]["rounds"] > 0
        assert data["paths"][path]["p50_ms"] > 0
    assert data["tool_round_over_plain"]["p50"] > 0
    assert data["server_round_over_plain"]["p50"] > 0
