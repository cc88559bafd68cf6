"""Benchmark placement: servers and load on separate CPUs, applied to every thread."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench._servers import pin, placement, running

needs_two_cpus = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="placement needs two usable CPUs and CPU affinity",
)
TWO_THREADS = (
    "import signal, threading, time\n"
    "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n"
    "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    "print('listening on 127.0.0.1:1', flush=True)\n"
    "signal.sigwait({signal.SIGTERM})\n"
)
"""A stand-in server: a second thread, the ready line, then a clean exit on SIGTERM."""


def threads_of(pid: int, count: int) -> list[int]:
    """The thread ids of process `pid` once it has `count` threads (waits up to 10 s)."""
    deadline = time.monotonic() + 10
    while (tasks := os.listdir(f"/proc/{pid}/task")) and len(tasks) < count:
        assert time.monotonic() < deadline, f"process {pid} never had {count} threads"
        time.sleep(0.01)
    return [int(task) for task in tasks]


@needs_two_cpus
def test_placement_splits_the_usable_cpus() -> None:
    where = placement()
    assert where is not None
    servers, load = where
    assert len(servers) == 1
    assert servers.isdisjoint(load)
    assert servers | load == os.sched_getaffinity(0)


@needs_two_cpus
def test_a_server_started_on_cpus_runs_every_thread_there(tmp_path: Path) -> None:
    cpu = max(os.sched_getaffinity(0))

    async def scenario() -> None:
        argv = [sys.executable, "-c", TWO_THREADS]
        async with running("stand-in", argv, cwd=tmp_path, cpus={cpu}) as server:
            tasks = threads_of(server.pid, 2)
            assert all(os.sched_getaffinity(task) == {cpu} for task in tasks)

    asyncio.run(scenario())
    assert os.sched_getaffinity(0) != {cpu}  # only the server was placed


@needs_two_cpus
def test_pin_moves_every_thread_of_a_running_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", TWO_THREADS], stdout=subprocess.DEVNULL)
    try:
        cpu = min(os.sched_getaffinity(0))
        threads_of(child.pid, 2)
        assert pin(child.pid, {cpu})
        tasks = threads_of(child.pid, 2)
        assert all(os.sched_getaffinity(task) == {cpu} for task in tasks)
    finally:
        child.kill()
        child.wait()


def test_pin_reports_a_process_that_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert pin(child.pid, {0}) is False


TWO_LISTENERS = (
    "import signal\n"
    "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n"
    "print('agentskit-chat http listening on 127.0.0.1:2 (connect)', flush=True)\n"
    "print('agentskit-chat listening on 127.0.0.1:1 (plaintext)', flush=True)\n"
    "signal.sigwait({signal.SIGTERM})\n"
)
"""A stand-in `serve --http-listen`: the HTTP listener's line comes before the gRPC one."""


def test_a_server_with_an_http_listener_reports_both_addresses(tmp_path: Path) -> None:
    async def scenario() -> tuple[str, str | None]:
        argv = [sys.executable, "-c", TWO_LISTENERS]
        async with running("stand-in", argv, cwd=tmp_path) as server:
            return server.address, server.http_address

    assert asyncio.run(scenario()) == ("127.0.0.1:1", "127.0.0.1:2")


def test_a_server_without_one_has_no_http_address(tmp_path: Path) -> None:
    async def scenario() -> str | None:
        argv = [sys.executable, "-c", TWO_THREADS]
        async with running("stand-in", argv, cwd=tmp_path) as server:
            return server.http_address

    assert asyncio.run(scenario()) is None
