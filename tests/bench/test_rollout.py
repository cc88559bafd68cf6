"""The rollout benchmark, small: new sessions split between two revisions as their weights
say, and one session id gets one revision on two servers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench.rollout import main

SESSIONS = 500
SAME = 100
WEIGHTS = (80, 20)
SIGMAS = 6.0
"""A binomial draw lands further than this many standard deviations from its mean less
than once in 10^8 runs: the bound only a wrong split crosses."""


def test_new_sessions_split_as_the_weights_say_and_two_servers_agree_on_an_id(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    figures = tmp_path / "rollout.json"
    argv = ["--sessions", str(SESSIONS), "--same", str(SAME), "--weights", "80,20"]
    assert main([*argv, "--json", str(figures)]) == 0
    assert "Same id on two servers: 100 of 100" in capsys.readouterr().out
    data = json.loads(figures.read_text())
    shares = {share["revision"]: share["sessions"] for share in data["shares"]}
    assert sum(shares.values()) == SESSIONS
    for revision, weight in enumerate(WEIGHTS, start=1):
        expected = weight / sum(WEIGHTS)
        spread = math.sqrt(SESSIONS * expected * (1 - expected))
        assert abs(shares[revision] - SESSIONS * expected) <= SIGMAS * spread, shares
    assert data["same_ids"] == SAME
    assert data["disagreements"] == []
    # Both revisions among the shared ids, so agreeing was not agreeing on one revision.
    assert set(data["same_ids_by_revision"]) == {"1", "2"}
