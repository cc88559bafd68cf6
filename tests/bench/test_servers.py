"""Benchmark placement: servers and load on separate CPUs, applied to every thread."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench._servers import pin, placement

needs_two_cpus = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="placement needs two usable CPUs and CPU affinity",
)


@needs_two_cpus
def test_placement_splits_the_usable_cpus() -> None:
    where = placement()
    assert where is not None
    servers, load = where
    assert len(servers) == 1
    assert servers.isdisjoint(load)
    assert servers | load == os.sched_getaffinity(0)


@needs_two_cpus
def test_pin_moves_every_thread_of_a_running_process() -> None:
    threads = "import threading, time; threading.Thread(target=time.sleep, args=(30,)).start()"
    child = subprocess.Popen([sys.executable, "-c", f"{threads}; time.sleep(30)"])
    try:
        cpu = min(os.sched_getaffinity(0))
        while len(os.listdir(f"/proc/{child.pid}/task")) < 2:
            pass  # the second thread is starting
        assert pin(child.pid, {cpu})
        tasks = [int(task) for task in os.listdir(f"/proc/{child.pid}/task")]
        assert len(tasks) == 2
        assert all(os.sched_getaffinity(task) == {cpu} for task in tasks)
    finally:
        child.kill()
        child.wait()


def test_pin_reports_a_process_that_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert pin(child.pid, {0}) is False
