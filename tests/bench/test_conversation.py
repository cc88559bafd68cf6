"""The conversation benchmark still runs (a smoke run; tests never judge speed)."""

from __future__ import annotations

import pytest

from bench.conversation import main


def test_quick_benchmark_run_prints_every_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--quick"]) == 0
    out = capsys.readouterr().out
    for heading in ("Single dispatch", "Growth with history length", "Growth with route count"):
        assert heading in out
    assert "rebuild of 1,000 decisions" in out
