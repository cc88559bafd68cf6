"""What the test processes of one run share when pytest-xdist runs test files side by side.

`make unit` runs the suite on two worker processes (`-n 2 --dist loadfile`); plain
`pytest` runs it in one. A session fixture runs once in each worker, so a fixture that
builds something expensive builds it into `run_directory` under a lock: the first worker
builds it, the others wait for it and reuse it. Files the tests rebuild in the checkout
(client/typescript/dist) are guarded by a lock in build/locks, held by every test that
builds them or reads them while they could be rebuilt.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import pytest
from filelock import FileLock

ROOT: Final = Path(__file__).resolve().parents[1]
LOCKS: Final = ROOT / "build" / "locks"
LOCK_TIMEOUT: Final = 1800.0
"""Seconds a test waits for a lock before it fails: a bound on a stuck holder, not a pause."""


def worker() -> str | None:
    """The xdist worker this process is (`gw0`, `gw1`, ...); None in a run without workers."""
    return os.environ.get("PYTEST_XDIST_WORKER")


def run_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temporary directory that every worker of this run shares (this process's own base
    temporary directory when the run has no workers); removed with pytest's old runs."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if worker() is not None else base


def run_lock(tmp_path_factory: pytest.TempPathFactory, name: str) -> FileLock:
    """A lock that the workers of this run share, named `name`."""
    return FileLock(run_directory(tmp_path_factory) / f"{name}.lock", timeout=LOCK_TIMEOUT)


def checkout_lock(name: str) -> FileLock:
    """A lock on something in the checkout, shared by every test process working in it."""
    LOCKS.mkdir(parents=True, exist_ok=True)
    return FileLock(LOCKS / f"{name}.lock", timeout=LOCK_TIMEOUT)


def typescript_client() -> FileLock:
    """client/typescript/dist: `npm run build` of the client (`npm test`, and `npm pack`'s
    prepack in `make dist`) removes it and compiles it again, so a test that builds it, or
    compiles or runs a program against it, holds this lock meanwhile."""
    return checkout_lock("typescript-client")
