"""Session-wide fixtures: the throwaway PostgreSQL cluster (see bench/_postgres.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres import SKIP_ENV, Cluster, cluster, skipped


@pytest.fixture(scope="session")
def postgres() -> Iterator[Cluster]:
    """One PostgreSQL server for the whole run, started on first use and always stopped."""
    if skipped():
        pytest.skip(f"PostgreSQL tests skipped: {SKIP_ENV} is set")
    with cluster() as started:
        yield started
