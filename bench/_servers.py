"""Benchmark servers as child processes: start, wait until listening, stop with SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

READY: Final = re.compile(rb"listening on (\S+):(\d+)")
START_TIMEOUT: Final = 30.0
STOP_TIMEOUT: Final = 20.0
TAIL: Final = 2_000


class ServerError(RuntimeError):
    """A benchmark server did not start, or did not stop cleanly."""


@dataclass(frozen=True, slots=True)
class Server:
    """A running child server: its name, process id and `host:port` address."""

    name: str
    pid: int
    address: str

    def cpu_seconds(self) -> float | None:
        """User plus system CPU time the server used so far; None without Linux /proc."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def pin(self, cpus: set[int]) -> bool:
        """Run every thread of the server, and those it starts later, on `cpus` only."""
        return pin(self.pid, cpus)


def pin(pid: int, cpus: set[int]) -> bool:
    """Restrict every current thread of process `pid` to `cpus`; False where unsupported.

    Threads started afterwards inherit the set from the thread that starts them.
    """
    if not hasattr(os, "sched_setaffinity"):
        return False
    try:
        threads = [int(task) for task in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return False
    for thread in threads:
        with contextlib.suppress(ProcessLookupError):  # a thread that just ended
            os.sched_setaffinity(thread, cpus)
    return True


def placement() -> tuple[set[int], set[int]] | None:
    """(server CPUs, load CPUs): the last usable CPU for servers, the rest for the load.

    None with fewer than two usable CPUs, or where affinity is not supported.
    """
    if not hasattr(os, "sched_getaffinity"):
        return None
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        return None
    return {usable[-1]}, set(usable[:-1])


@asynccontextmanager
async def running(
    name: str, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None
) -> AsyncIterator[Server]:
    """Run `argv` until the block ends; it must print `listening on HOST:PORT` and exit 0."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = process.stdout, process.stderr
    if stdout is None or stderr is None:
        raise ServerError(f"{name}: no pipes to the server process")
    errors = asyncio.create_task(stderr.read())
    address: str | None = None
    rest: asyncio.Task[None] | None = None
    try:
        address = await _listening(stdout)
        if address is not None:
            rest = asyncio.create_task(_discard(stdout))  # log lines must never fill the pipe
            yield Server(name, process.pid, address)
    finally:
        status = await _stop(process)
        if rest is None:
            await stdout.read()
        else:
            await rest
        log = (await errors).decode(errors="replace")[-TAIL:]
    if address is None:
        raise ServerError(f"{name} server did not start (exit status {status}): {log}")
    if status != 0:
        raise ServerError(f"{name} server exited with status {status}: {log}")


async def _listening(stdout: asyncio.StreamReader) -> str | None:
    """The `host:port` of the first listening line, or None at EOF or after START_TIMEOUT."""
    try:
        async with asyncio.timeout(START_TIMEOUT):
            while line := await stdout.readline():
                if found := READY.search(line):
                    return f"{found[1].decode()}:{found[2].decode()}"
    except TimeoutError:
        return None
    return None


async def _discard(stdout: asyncio.StreamReader) -> None:
    """Read and drop the server's output until it ends."""
    while await stdout.read(65536):
        pass


async def _stop(process: asyncio.subprocess.Process) -> int:
    """SIGTERM, then SIGKILL after STOP_TIMEOUT; the exit status."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
    try:
        return await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        return await process.wait()
