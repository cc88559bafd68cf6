"""Fixtures: `serve` processes that never outlive a test, and the slow chat's gate."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Protocol

import pytest

from tests.cli.fixtures.serving import REPO, Gate, Server, base_env, command


class Launcher(Protocol):
    def __call__(
        self,
        state_dir: Path | None,
        *args: str,
        env: Mapping[str, str] | None = None,
        cwd: Path = REPO,
        wait: bool = True,
        log_level: str = "WARNING",
    ) -> Server: ...


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Launcher]:
    """Start `serve` processes; every one still running at the end is killed and reaped."""
    started: list[Server] = []

    def start(
        state_dir: Path | None,
        *args: str,
        env: Mapping[str, str] | None = None,
        cwd: Path = REPO,
        wait: bool = True,
        log_level: str = "WARNING",
    ) -> Server:
        argv = ["serve", "--listen", "127.0.0.1:0"]
        if state_dir is not None:
            argv += ["--state-dir", str(state_dir)]
        stderr_path = tmp_path / f"serve-{len(started)}.stderr"
        stderr = stderr_path.open("wb")
        try:
            process = subprocess.Popen(
                command(*argv, *args, log_level=log_level),
                cwd=cwd,
                env=base_env(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                bufsize=0,
            )
        except BaseException:
            stderr.close()
            raise
        server = Server(process, stderr, stderr_path)
        started.append(server)
        if wait:
            server.wait_listening()
        return server

    try:
        yield start
    finally:
        for server in started:
            server.close()


@pytest.fixture
def gate(tmp_path: Path) -> Gate:
    directory = tmp_path / "gate"
    directory.mkdir()
    return Gate(directory)
