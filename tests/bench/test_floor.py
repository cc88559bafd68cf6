"""The turn's CPU breakdown: the in-process turn runs the ping definition's route, and the
rest is what `serve` spends beyond the echo and the in-process turn."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.floor import QUICK, REST_GOAL_US, in_process_cpu_us, report


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_the_in_process_turn_completes_and_costs_cpu(store: str, tmp_path: Path) -> None:
    assert asyncio.run(in_process_cpu_us(store, 60, tmp_path)) > 0


def test_the_rest_is_serves_cpu_beyond_the_echo_and_the_in_process_turn() -> None:
    targets = {
        "echo": {"server_cpu_us_per_call": 500.0},
        "sqlite": {"server_cpu_us_per_call": 1_200.0},
        "memory": {"server_cpu_us_per_call": None},
    }
    data = report(
        {"sqlite": [600.0, 580.0, 620.0], "memory": [300.0]},
        {"targets": targets},
        QUICK,
        quick=True,
    )
    sqlite = data["stores"]["sqlite"]
    assert sqlite["rest_us"] == pytest.approx(100.0)
    assert REST_GOAL_US == 150.0
    assert sqlite["goal_met"] is True
    assert data["stores"]["memory"]["rest_us"] is None
    assert data["stores"]["memory"]["goal_met"] is False
