"""The OpenAI front benchmark still runs (a smoke run; tests never judge speed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.openai_front import MODES, TTFC_PATHS, main


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or not Path("/proc/self/stat").exists(),
    reason="the benchmark reads CPU time from /proc and places processes by CPU affinity",
)
def test_quick_benchmark_run_measures_every_target(tmp_path: Path) -> None:
    figures = tmp_path / "openai.json"
    cpus = os.sched_getaffinity(0)
    assert main(["--quick", "--json", str(figures)]) == 0
    data = json.loads(figures.read_text())
    for mode in MODES:
        assert data["cpu"][mode]["turns_per_s"] > 0
    assert data["cpu"]["grpc"]["turns_per_s"] > 0
    assert set(data["ttfc"]) == set(TTFC_PATHS)
    assert os.sched_getaffinity(0) == cpus  # the load generator's own placement is restored
