"""The model delegation benchmark still runs (a smoke run; tests never judge speed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.model import CHUNKS, main


def test_quick_benchmark_run_measures_both_paths(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    figures = tmp_path / "model.json"
    assert main(["--quick", "--calls", "4", "--json", str(figures)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0] for line in out.splitlines() if line.strip()}
    assert {"direct", "service"} <= rows
    data = json.loads(figures.read_text())
    assert data["chunks"] == CHUNKS
    for path in ("direct", "service"):
        assert data["paths"][path]["calls"] == 4
        assert data["paths"][path]["failures"] == 0
