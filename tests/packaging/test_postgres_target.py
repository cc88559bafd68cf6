"""`make postgres`: a throwaway cluster with its password and digest key, migrated, and the
`serve` line it prints runs a turn on it; `make postgres-stop` stops it and removes it."""

from __future__ import annotations

import asyncio
import shlex
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from agentskit_chat_client import ChatClient, TurnCompleted
from tests import postgres
from tests.cli.fixtures.serving import Server, base_env
from tests.docs.pages import ROOT

pytestmark = pytest.mark.skipif(
    postgres.skipped(), reason=f"{postgres.SKIP_ENV} is set: no PostgreSQL here"
)


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=ROOT,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _refused(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


async def _turn(target: str) -> object:
    async with ChatClient(target, timeout=30) as client:
        session = await client.create_session("coffee")
        events = [event async for event in client.submit(session.session_id, "/start")]
        return events[-1]


def test_the_target_starts_a_cluster_that_serve_uses_and_stop_removes_it(tmp_path: Path) -> None:
    port = postgres.free_port()
    # pytest's own directories are private to this user: as root, the cluster's commands run
    # as `postgres`, which must reach PG_DIR's parent.
    parent = Path(tempfile.mkdtemp(prefix="make-postgres-"))
    parent.chmod(0o755)
    where = parent / "pg"
    settings = (f"PG_DIR={where}", f"PG_PORT={port}")
    try:
        started = _make("postgres", *settings)
        assert started.returncode == 0, started.stdout + started.stderr
        assert not _refused(port)
        (line,) = (ln.strip() for ln in started.stdout.splitlines() if " serve --store " in ln)
        stderr_path = tmp_path / "serve.stderr"
        stderr = stderr_path.open("wb")
        server = Server(
            subprocess.Popen(
                [*shlex.split(line), "--listen", "127.0.0.1:0"],
                cwd=ROOT,
                env=base_env(),
                stdout=subprocess.PIPE,
                stderr=stderr,
            ),
            stderr,
            stderr_path,
        )
        try:
            server.wait_listening(timeout=60)
            last = asyncio.run(_turn(server.target))
            assert isinstance(last, TurnCompleted)
            assert last.snapshot.state == "ordering"
        finally:
            server.close()
        again = _make("postgres", *settings)  # a second cluster over the first is refused
        assert again.returncode != 0
        assert "exists; make postgres-stop removes it" in again.stderr
    finally:
        stopped = _make("postgres-stop", *settings)
    assert stopped.returncode == 0, stopped.stderr
    assert not where.exists()
    assert _refused(port)
    parent.rmdir()
