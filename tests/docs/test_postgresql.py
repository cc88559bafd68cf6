"""The PostgreSQL guide's commands (docs/how-to/postgresql.md) run as written: the
throwaway cluster recipe starts a cluster and a `serve` on it, and the production `migrate`
and `serve` lines (pointed at that cluster and its files) are accepted and share its
sessions.

The only changes made to the text: a free port instead of 55432, `--listen 127.0.0.1:0` added
to each `serve` (the default port may be taken), the production URL's host and secret
directory replaced by the local cluster's. As root, the cluster's commands run as the
`postgres` user, since initdb refuses root (the guide says to run them as a normal user).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentskit_chat_client import ChatClient, TurnCompleted
from tests import postgres
from tests.cli.fixtures.serving import REPO, Server, base_env
from tests.docs.pages import DOCS, marked

TIMEOUT = 120
GUIDE = DOCS / "how-to" / "postgresql.md"
STOP = re.compile(r"After Ctrl-C, `([^`]+)` removes the cluster")

pytestmark = pytest.mark.skipif(
    postgres.skipped(), reason=f"{postgres.SKIP_ENV} is set: no PostgreSQL here"
)


def block(name: str) -> list[str]:
    (found,) = (b for b in marked("commands", where=[GUIDE]) if b.name == name)
    return found.code.splitlines()


def as_cluster_user(script: str) -> list[str]:
    """bash running `script`, as `postgres` when this process is root."""
    argv = ["bash", "-euo", "pipefail", "-c", script]
    return ["runuser", "-u", postgres.SERVER_USER, "--", *argv] if os.geteuid() == 0 else argv


def environment(pgtmp: str = "") -> dict[str, str]:
    """The tests' environment with `agentskit-chat` on PATH and PGTMP set."""
    env = base_env({"PGTMP": pgtmp})
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return env


def serve(line: str, tmp_path: Path, name: str, env: dict[str, str]) -> Server:
    assert line.startswith("agentskit-chat serve "), line
    stderr_path = tmp_path / f"{name}.stderr"
    stderr = stderr_path.open("wb")
    process = subprocess.Popen(
        ["bash", "-c", f"exec {line} --listen 127.0.0.1:0"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        bufsize=0,
    )
    server = Server(process, stderr, stderr_path)
    server.wait_listening()
    return server


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, int, list[str]]]:
    """The recipe's lines up to `agentskit-chat` run in one shell: its PGTMP, the port it
    used and the rest of the recipe. Stopped and removed with the guide's own command."""
    postgres.binaries()  # installs Debian's postgresql when absent and root, as `make test` does
    port = postgres.free_port()
    lines = [line.replace("55432", str(port)) for line in block("postgresql-local")]
    first = next(i for i, line in enumerate(lines) if line.startswith("agentskit-chat"))
    script = "\n".join([*lines[:first], 'echo "PGTMP=$PGTMP"'])
    done = subprocess.run(
        as_cluster_user(script),
        cwd="/tmp",
        env=environment(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    found = re.search(r"^PGTMP=(\S+)$", done.stdout, re.M)
    pgtmp = found.group(1) if found else ""
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        assert pgtmp, done.stdout
        yield pgtmp, port, lines[first:]
    finally:
        if pgtmp:
            stop = STOP.search(GUIDE.read_text(encoding="utf-8"))
            assert stop is not None, "the guide lost the command that removes the cluster"
            cleaned = subprocess.run(
                as_cluster_user(f"export PATH={lines[0].split('=', 1)[1]}\n{stop.group(1)}"),
                cwd="/tmp",
                env=environment(pgtmp),
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                check=False,
            )
            assert cleaned.returncode == 0, cleaned.stderr
            assert not Path(pgtmp).exists()


def test_the_local_recipe_and_the_production_lines_run_as_written(
    cluster: tuple[str, int, list[str]], tmp_path: Path
) -> None:
    pgtmp, port, rest = cluster
    env = environment(pgtmp)
    migrate, serve_line = rest
    migrated = subprocess.run(
        ["bash", "-c", migrate],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    local = serve(serve_line, tmp_path, "local", env)
    production = [
        line.replace("db.internal:5432", f"127.0.0.1:{port}").replace("/run/secrets/", f"{pgtmp}/")
        for line in block("postgresql")
    ]
    again = subprocess.run(
        ["bash", "-c", production[0]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    servers = [local]
    try:
        assert again.returncode == 0, again.stdout + again.stderr
        servers.append(serve(production[1], tmp_path, "production", env))
        state = asyncio.run(_shared(local.target, servers[1].target))
        assert state == "collecting"
    finally:
        for server in servers:
            server.close()


async def _shared(first: str, second: str) -> str:
    """A turn through `first`, read back through `second`: the state it reached."""
    async with ChatClient(first, timeout=30) as client:
        session = await client.create_session("support")
        events = [event async for event in client.submit(session.session_id, "/start")]
        assert isinstance(events[-1], TurnCompleted), events
    async with ChatClient(second, timeout=30) as client:
        history = await client.get_session(session.session_id)
    return history.session.snapshot.state
