"""GetSession beside turns on shared sessions, from several processes through two replicas:
no call reports a damaged history that is intact (the short run of bench/snapshot.py)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from bench.snapshot import QUICK, false_errors, run
from tests.postgres import Cluster


@pytest.mark.parametrize("store", ["postgresql", "sqlite"])
def test_reads_beside_turns_never_report_a_false_corruption(
    store: str, request: pytest.FixtureRequest
) -> None:
    postgres: Cluster | None = (
        request.getfixturevalue("postgres") if store == "postgresql" else None
    )
    config = replace(QUICK, store=store)
    counts, _ = asyncio.run(run(config, postgres))
    assert false_errors(counts) == 0, counts
    calls = sum(n for key, n in counts.items() if key.startswith(("get:", "turn:")))
    assert calls >= config.calls, counts
    assert counts.get("get:OK", 0) > 0, counts
    assert counts.get("turn:OK", 0) > 0, counts
    # The turns met each other on their sessions: the load raced, as it must to mean anything.
    assert counts.get("turn:ABORTED", 0) > 0, counts
