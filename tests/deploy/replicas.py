"""`agentskit-chat serve` replicas on fixed loopback ports over one PostgreSQL database,
each restartable on its own port (so a proxy's upstream list stays valid), and the
fake model they all call.

The definition `assistant` sends every message to the fake model (an agentic turn), which
streams `chunks` chunks `delay` seconds apart.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agentskit_chat.fakemodel import Reply
from tests.cli.fixtures.serving import REPO, Server, base_env, command, run_cli
from tests.deploy.nginx import free_port

DEFINITION: Final = "assistant"
DIGEST_KEY: Final = "5f" * 32


def slow_reply(chunks: int, delay: float) -> Reply:
    """A model answer of `chunks` numbered words, one every `delay` seconds."""
    return Reply(chunks=tuple(f"w{n} " for n in range(chunks)), delay=delay)


def write_definitions(directory: Path, model_url: str) -> Path:
    """The `assistant` chat: no routes, so every message goes to the model."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "assistant.yaml").write_text(
        f"id: {DEFINITION}\nrevision: 1\n"
        f"model: {{adapter: openai, base_url: '{model_url}', model: fake-1}}\n"
        "conversation:\n  initial: open\n  states: {open: {on: {hello: open}}}\n"
        "  routes: [{id: hello, command: /hello, event: hello, response: Hi.}]\n",
        encoding="utf-8",
    )
    return directory


@dataclass(frozen=True, slots=True)
class Store:
    """A migrated PostgreSQL database and the file holding its password."""

    url: str
    password_file: Path


def migrate(url: str, password_file: Path) -> Store:
    done = run_cli("migrate", "--store", url, "--store-password-file", str(password_file))
    if done.returncode != 0:
        raise RuntimeError(f"migrate failed: {done.stderr}")
    return Store(url, password_file)


class Replicas:
    """`count` replicas of one service; `restart(n, signum)` stops one and starts it again
    on the same port with the same flags."""

    def __init__(
        self,
        directory: Path,
        store: Store,
        definitions: Path,
        count: int,
        flags: Sequence[str] = (),
    ) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = directory / "digest.key"
        self._key.write_text(DIGEST_KEY + "\n")
        self._store = store
        self._definitions = definitions
        self._flags = tuple(flags)
        self.ports = [free_port() for _ in range(count)]
        self.servers: list[Server | None] = [None] * count
        self.generations = [0] * count
        self.retired: list[Server] = []

    @property
    def addresses(self) -> list[str]:
        return [f"127.0.0.1:{port}" for port in self.ports]

    def start_all(self) -> None:
        for n in range(len(self.ports)):
            self.start(n, wait=False)
        for server in self.servers:
            assert server is not None
            server.wait_listening()

    def start(self, n: int, wait: bool = True) -> Server:
        assert self.servers[n] is None, f"replica {n} runs already"
        self.generations[n] += 1
        own = self.directory / f"replica-{n}"
        log = own.with_suffix(f".{self.generations[n]}.stderr")
        own.mkdir(parents=True, exist_ok=True)
        argv = command(
            "serve",
            "--listen",
            self.addresses[n],
            "--state-dir",
            str(own),
            "--store",
            self._store.url,
            "--store-password-file",
            str(self._store.password_file),
            "--digest-key-file",
            str(self._key),
            "--definitions",
            str(self._definitions),
            "--log-format",
            "json",
            *self._flags,
            log_level="WARNING",
        )
        stderr = log.open("wb")
        try:
            process = subprocess.Popen(
                argv,
                cwd=REPO,
                env=base_env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                bufsize=0,
            )
        except BaseException:
            stderr.close()
            raise
        server = Server(process, stderr, log)
        self.servers[n] = server
        if wait:
            server.wait_listening()
        return server

    def stop(self, n: int, signum: int = signal.SIGTERM) -> int:
        """Signal replica `n` and wait for it to exit; its exit status."""
        server = self.servers[n]
        assert server is not None, f"replica {n} is not running"
        server.send(signum)
        status = server.wait()
        self.servers[n] = None
        self.retired.append(server)
        return status

    def restart(self, n: int, signum: int = signal.SIGTERM) -> int:
        """Stop replica `n` with `signum`, then start it again; the exit status."""
        status = self.stop(n, signum)
        self.start(n)
        return status

    def close(self) -> None:
        """Kill every replica still running and close every pipe."""
        for server in [*self.servers, *self.retired]:
            if server is not None:
                server.close()
        self.servers = [None] * len(self.servers)
