"""Benchmark servers as child processes: start (optionally on chosen CPUs), wait until
listening, stop with SIGTERM; and the CPU placement of servers and load.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, ExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

READY: Final = re.compile(rb"(?<!http )listening on (\S+):(\d+)")
HTTP_READY: Final = re.compile(rb"http listening on (\S+):(\d+)")
"""`serve --http-listen` prints this line for its HTTP listener before its gRPC one."""
START_TIMEOUT: Final = 30.0
STOP_TIMEOUT: Final = 20.0
TAIL: Final = 2_000
ROOT: Final = Path(__file__).resolve().parents[1]
Placement = tuple[set[int] | None, set[int] | None]


class ServerError(RuntimeError):
    """A benchmark server did not start, or did not stop cleanly."""


@dataclass(frozen=True, slots=True)
class Server:
    """A running child server: its name, process id and `host:port` address(es)."""

    name: str
    pid: int
    address: str
    http_address: str | None = None
    """The HTTP listener's `host:port`, for a `serve` with `--http-listen`."""

    def cpu_seconds(self) -> float | None:
        """User plus system CPU time the server used so far; None without Linux /proc."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")


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


PIN_THEN_EXEC: Final = (
    "import os, sys; os.sched_setaffinity(0, {int(c) for c in sys.argv[1].split(',')});"
    " os.execvp(sys.argv[2], sys.argv[2:])"
)
"""Run as `python -c PIN_THEN_EXEC CPUS ARGV...`: pins itself, then becomes ARGV."""


def pinned(argv: Sequence[str], cpus: set[int]) -> list[str]:
    """`argv` started on `cpus` only, with every thread it will ever have: through
    `taskset -c`, or where there is none, through PIN_THEN_EXEC (the same affinity call)."""
    listed = ",".join(str(cpu) for cpu in sorted(cpus))
    taskset = shutil.which("taskset")
    if taskset is not None:
        return [taskset, "-c", listed, *argv]
    return [sys.executable, "-c", PIN_THEN_EXEC, listed, *argv]


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


def placed(stack: ExitStack | AsyncExitStack, wanted: bool = True) -> Placement:
    """(server CPUs, load CPUs), this process pinned to the load CPUs until `stack` closes.

    (None, None) when placement is not `wanted`, or with fewer than two usable CPUs, or
    where pinning fails: then the scheduler places everything.
    """
    where = placement() if wanted else None
    if where is None:
        return None, None
    stack.callback(pin, os.getpid(), os.sched_getaffinity(0))
    if not pin(os.getpid(), where[1]):
        return None, None
    return where


def bench_env() -> dict[str, str]:
    """This process's environment without any `serve` or OpenTelemetry setting: each
    benchmark sets those it measures."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("AGENTSKIT_CHAT_", "OTEL_"))}


def collector(env: Mapping[str, str], cpus: set[int] | None) -> AbstractAsyncContextManager[Server]:
    """The OTLP collector (bench/_collector.py) in a process of its own, on `cpus`."""
    argv = [sys.executable, "-m", "bench._collector"]
    return running("collector", argv, cwd=ROOT, env=env, cpus=cpus)


@asynccontextmanager
async def running(
    name: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    cpus: set[int] | None = None,
    start_timeout: float = START_TIMEOUT,
) -> AsyncIterator[Server]:
    """Run `argv` (on `cpus` only, if given) until the block ends.

    It must print `listening on HOST:PORT` (after `http listening on HOST:PORT` when it
    has an HTTP listener too) within `start_timeout` seconds, and exit 0 when stopped.
    """
    process = await asyncio.create_subprocess_exec(
        *(argv if cpus is None else pinned(argv, cpus)),
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
        address, http_address = await _listening(stdout, start_timeout)
        if address is not None:
            rest = asyncio.create_task(_discard(stdout))  # log lines must never fill the pipe
            yield Server(name, process.pid, address, http_address)
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


async def _listening(stdout: asyncio.StreamReader, timeout: float) -> tuple[str | None, str | None]:
    """The `host:port` of the listening line and of the HTTP listening line before it.

    The first is None at EOF or after `timeout` seconds, the second when there was no such
    line.
    """
    http: str | None = None
    try:
        async with asyncio.timeout(timeout):
            while line := await stdout.readline():
                if found := HTTP_READY.search(line):
                    http = f"{found[1].decode()}:{found[2].decode()}"
                elif found := READY.search(line):
                    return f"{found[1].decode()}:{found[2].decode()}", http
    except TimeoutError:
        return None, http
    return None, http


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
