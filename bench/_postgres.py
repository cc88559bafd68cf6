"""A throwaway PostgreSQL cluster on loopback, for the test suite and the benchmarks.

`Cluster.start()` finds the server binaries of the Debian `postgresql` package (installing
the package with apt-get when it is absent and this process is root), runs `initdb` into a
fresh temporary directory, and starts the server on a free 127.0.0.1 port with password
authentication over TCP. initdb refuses to run as root, so as root every server command
runs as the package's `postgres` system user. `stop()` stops the server and removes the
directory; it is safe to call at any point.

Set AGENTSKIT_CHAT_SKIP_POSTGRES=1 to skip the PostgreSQL tests on a machine that cannot
run a server; nothing else skips them.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import psycopg

SKIP_ENV: Final = "AGENTSKIT_CHAT_SKIP_POSTGRES"
SERVER_USER: Final = "postgres"
SUPERUSER: Final = "agentskit"
PORT_ATTEMPTS: Final = 3


def skipped() -> bool:
    """True when the environment explicitly asks to skip the PostgreSQL tests."""
    return os.environ.get(SKIP_ENV, "") not in ("", "0")


def binaries() -> Path:
    """The directory of `initdb` and `pg_ctl`, installing the server package when absent."""
    found = _find_binaries()
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], check=True, env=env, capture_output=True)
        subprocess.run(
            ["apt-get", "install", "-q", "-y", "--no-install-recommends", "postgresql"],
            check=True,
            env=env,
            capture_output=True,
        )
        found = _find_binaries()
    if found is None:
        raise RuntimeError(
            "PostgreSQL server binaries not found: install the Debian package postgresql,"
            f" or set {SKIP_ENV}=1 to skip the PostgreSQL tests"
        )
    return found


def _find_binaries() -> Path | None:
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda path: int(path.parts[-3]) if path.parts[-3].isdigit() else 0,
    )
    if candidates:
        return candidates[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Cluster:
    """One PostgreSQL server in a temporary directory, owned by the test session."""

    password: str = field(default_factory=lambda: secrets.token_hex(12), repr=False)
    port: int = 0
    directory: Path | None = None
    _bin: Path | None = None

    @property
    def data(self) -> Path:
        assert self.directory is not None
        return self.directory / "data"

    def url(self, database: str = "postgres") -> str:
        """The store URL of `database`, without the password."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        """initdb and start; raises when the server does not come up."""
        self._bin = binaries()
        self.directory = Path(tempfile.mkdtemp(prefix="agentskit-pg-"))
        self.directory.chmod(0o700)
        pwfile = self.directory / "pwfile"
        pwfile.write_text(self.password + "\n")
        if os.geteuid() == 0:
            shutil.chown(self.directory, SERVER_USER)
            shutil.chown(pwfile, SERVER_USER)
        self._as_server(
            "initdb",
            "--pgdata",
            str(self.data),
            "--username",
            SUPERUSER,
            "--pwfile",
            str(pwfile),
            "--auth-host",
            "scram-sha-256",
            "--auth-local",
            "trust",
            "--encoding",
            "UTF8",
            "--no-sync",
        )
        pwfile.unlink()
        # Another process (a second test worker, say) may bind the free port before the
        # server does: then the server starts again on another one.
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self.port = free_port()
            logged = self._log_size()
            try:
                self.run_server()
                return
            except RuntimeError:
                if attempt == PORT_ATTEMPTS or not self._port_was_taken(logged):
                    raise

    def _log_size(self) -> int:
        log = self._log()
        return log.stat().st_size if log.exists() else 0

    def _port_was_taken(self, since: int) -> bool:
        """Whether the server log, from byte `since` on, says the port was in use."""
        with self._log().open("rb") as log:
            log.seek(since)
            return b"Address already in use" in log.read()

    def _log(self) -> Path:
        assert self.directory is not None
        return self.directory / "server.log"

    def run_server(self) -> None:
        """Start the server of an initialised cluster (again, after `halt`)."""
        assert self.directory is not None
        options = " ".join(
            (
                "-c listen_addresses=127.0.0.1",
                f"-c port={self.port}",
                f"-c unix_socket_directories={self.directory}",
                "-c fsync=off",
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
                "-c max_connections=200",
                "-c shared_buffers=32MB",
            )
        )
        self._as_server(
            "pg_ctl",
            "start",
            "--pgdata",
            str(self.data),
            "--wait",
            "--timeout",
            "60",
            "--log",
            str(self._log()),
            "-o",
            options,
        )

    def halt(self, mode: str = "fast") -> None:
        """Stop the server, keeping its data (`run_server` starts it again)."""
        if self.directory is None or not (self.data / "postmaster.pid").exists():
            return
        self._as_server(
            "pg_ctl", "stop", "--pgdata", str(self.data), "--wait", "--mode", mode, check=False
        )

    def stop(self) -> None:
        """Stop the server and remove its directory."""
        try:
            self.halt("immediate")
        finally:
            if self.directory is not None:
                shutil.rmtree(self.directory, ignore_errors=True)
                self.directory = None

    def connect(self, database: str = "postgres") -> psycopg.Connection:
        """An autocommit superuser connection for setting tests up."""
        return psycopg.connect(self.url(database), password=self.password, autocommit=True)

    def create_database(self, name: str) -> str:
        """Create an empty database; its store URL."""
        with self.connect() as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop a database, ending its connections."""
        with self.connect() as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _as_server(self, program: str, *args: str, check: bool = True) -> None:
        assert self._bin is not None
        argv: Sequence[str] = [str(self._bin / program), *args]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", SERVER_USER, "--", *argv]
        done = subprocess.run(
            argv, capture_output=True, text=True, cwd=self.directory, check=False, timeout=120
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr[-2000:]}")


@contextlib.contextmanager
def cluster() -> Iterator[Cluster]:
    """A started cluster, stopped and removed when the block ends, however it ends."""
    started = Cluster()
    try:
        started.start()
        yield started
    finally:
        started.stop()
