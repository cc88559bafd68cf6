"""The LangGraph comparison still runs (a smoke run; tests never judge speed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.goals import GOALS
from bench.peer import SIDES, main, router


def test_the_peers_router_answers_as_the_support_definition() -> None:
    started = router({"state": "idle", "input": "/start"})
    assert (started["state"], started["answer"]) == ("collecting", "What is your name?")
    named = router({"state": "collecting", "input": "/name Ada"})
    assert (named["state"], named["answer"]) == ("complete", "Welcome, Ada.")
    other = router({"state": "idle", "input": "/name Ada"})
    assert other["state"] == "idle"


def test_quick_run_compares_both_sides_at_both_durabilities(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    figures = tmp_path / "peer.json"
    assert main(["--quick", "--json", str(figures)]) == 0
    assert "each side's default" in capsys.readouterr().out
    data = json.loads(figures.read_text())
    assert set(data["sides"]) == set(SIDES)
    for side in data["sides"].values():
        assert side["turns"] > 0
        assert side["failures"] == 0
    assert set(data["ratios"]) == {"normal", "full", "defaults"}
    assert data["ratio"] > 0
    assert all(goal.figure(data) for goal in GOALS if goal.bench == "peer")
