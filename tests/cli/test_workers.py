"""`serve --workers N`: worker processes share the port, the store and the digest key, and
the parent restarts, drains and reloads them."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import grpc
import pytest

from agentskit_chat_client import ChatClient, ChatError, Retry, Submit, TurnCompleted
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import Gate, Server, collect, slow_args, terminal

CLIENTS = 24
"""Connections opened at once; the kernel hashes each to a worker, so with two workers the
chance that all land on one is 2 ** -23."""
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
WORKER_LINE = re.compile(r"worker (\d+) listening as pid (\d+)")


@asynccontextmanager
async def clients(target: str, count: int = CLIENTS) -> AsyncIterator[list[ChatClient]]:
    """`count` clients, each on a connection of its own (channels of one process share
    their connections unless told not to)."""
    async with AsyncExitStack() as stack:
        opened = []
        for _ in range(count):
            channel = grpc.aio.insecure_channel(target, options=OWN_CONNECTION)
            await stack.enter_async_context(channel)
            opened.append(await stack.enter_async_context(ChatClient(channel, timeout=30)))
        yield opened


def workers_of(server: Server, count: int, timeout: float = 60.0) -> dict[int, int]:
    """{worker index: pid} from the parent's lines, once `count` workers are listed."""
    deadline = time.monotonic() + timeout
    while True:
        found = {int(i): int(pid) for i, pid in WORKER_LINE.findall(server.stdout)}
        if len(found) >= count:
            return found
        assert time.monotonic() < deadline, server.stdout
        time.sleep(0.05)
        server.records()  # reads what the server wrote meanwhile


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids: Iterable[int], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids):
        assert time.monotonic() < deadline, f"processes {list(pids)} still run"
        time.sleep(0.05)


def turn_pids(server: Server, turns: int, timeout: float = 30.0) -> list[int]:
    """The `pid` of the first `turns` turn log lines (waits until that many were logged)."""
    deadline = time.monotonic() + timeout
    while len(records := server.records("turn")) < turns:
        assert time.monotonic() < deadline, f"{len(records)} turn lines: {server.stdout}"
        time.sleep(0.05)
    return [record["pid"] for record in records]


def test_turns_spread_over_workers_that_share_the_store_and_the_key(
    launch: Launcher, tmp_path: Path
) -> None:
    server = launch(tmp_path / "state", "--workers", "2", log_level="INFO")
    assert re.search(r"listening on 127\.0\.0\.1:\d+ \(2 workers, 3 definitions, ", server.stdout)
    assert server.stdout.count("listening on 127.0.0.1:") == 1
    pids = set(workers_of(server, 2).values())
    assert all(parent_of(pid) == server.process.pid for pid in pids)

    async def scenario() -> None:
        async with clients(server.target) as opened:
            sessions = [await c.create_session("support") for c in opened]
            firsts = await asyncio.gather(
                *(
                    collect(c, s.session_id, Submit("/start"))
                    for c, s in zip(opened, sessions, strict=True)
                )
            )
            for events in firsts:
                assert terminal(events).snapshot.state == "collecting"  # type: ignore[union-attr]
            # Each session's retry goes through the next connection, often another worker:
            # the recorded decision replays only when both workers hold the same key.
            shifted = opened[1:] + opened[:1]
            retries = await asyncio.gather(
                *(collect(c, s.session_id, Retry()) for c, s in zip(shifted, sessions, strict=True))
            )
            for events in retries:
                done = terminal(events)
                assert isinstance(done, TurnCompleted)
                assert done.content == "What is your name?"
            for session in sessions:
                history = await opened[0].get_session(session.session_id)
                assert len(history.messages) == 2

    asyncio.run(scenario())
    served = turn_pids(server, 2 * CLIENTS)
    assert set(served) == pids  # every worker served turns, and only workers did
    server.send(signal.SIGTERM)
    assert server.wait() == 0
    assert server.stdout.count("agentskit-chat stopped") == 1
    wait_gone(pids)


def test_a_killed_worker_is_started_again_and_the_service_keeps_answering(
    launch: Launcher, tmp_path: Path
) -> None:
    server = launch(tmp_path / "state", "--workers", "2", log_level="INFO")
    before = workers_of(server, 2)
    os.kill(before[1], signal.SIGKILL)
    server.wait_output(f"worker 1 (pid {before[1]}) exited with status -9; starting it again")

    async def answers(count: int) -> None:
        async with clients(server.target, count) as opened:
            for client in opened:
                session = await client.create_session("support")
                done = terminal(await collect(client, session.session_id, Submit("/start")))
                assert isinstance(done, TurnCompleted)

    asyncio.run(answers(4))  # the other worker answers while the first starts again
    deadline = time.monotonic() + 60
    while (restarted := dict(WORKER_LINE.findall(server.stdout)[2:])) == {}:
        assert time.monotonic() < deadline, server.stdout
        time.sleep(0.05)
        server.records()
    new_pid = int(restarted["1"])
    assert new_pid != before[1]
    assert alive(new_pid)
    assert not alive(before[1])
    assert parent_of(new_pid) == server.process.pid

    turns_before = len(server.records("turn"))
    asyncio.run(answers(CLIENTS))
    served = turn_pids(server, turns_before + CLIENTS)[turns_before:]
    assert set(served) == {new_pid, before[2]}  # the new worker takes connections too
    server.send(signal.SIGTERM)
    assert server.wait() == 0


def test_sigterm_drains_every_worker_and_the_parent_exits_0(
    launch: Launcher, gate: Gate, tmp_path: Path
) -> None:
    pids_file = tmp_path / "pids"
    env = {**gate.env, "SLOW_CHAT_PIDS": str(pids_file)}
    server = launch(tmp_path / "state", *slow_args("--workers", "2"), env=env, log_level="INFO")
    workers = set(workers_of(server, 2).values())

    async def scenario() -> None:
        async with clients(server.target) as opened:
            sessions = [await c.create_session("slow") for c in opened]
            spare = [await c.create_session("slow") for c in opened]
            in_flight = [
                asyncio.ensure_future(collect(c, s.session_id, Submit("slow")))
                for c, s in zip(opened, sessions, strict=True)
            ]
            await gate.wait_calls(CLIENTS)
            assert set(pids_file.read_text().split()) == {str(pid) for pid in workers}

            server.send(signal.SIGTERM)
            deadline = time.monotonic() + 30
            while draining(server) != workers:
                assert time.monotonic() < deadline, server.stdout
                await asyncio.sleep(0.05)
            for client, session in zip(opened, spare, strict=True):
                with pytest.raises(ChatError) as refused:  # every worker refuses new turns
                    await collect(client, session.session_id, Submit("late"))
                assert refused.value.code == grpc.StatusCode.UNAVAILABLE
                assert refused.value.reason == "ERROR_REASON_SHUTTING_DOWN"
            assert server.process.poll() is None
            assert not any(task.done() for task in in_flight)

            gate.open()
            for events in await asyncio.gather(*in_flight):
                done = terminal(events)
                assert isinstance(done, TurnCompleted)
                assert done.content == "Stepped."

    asyncio.run(scenario())
    assert server.wait() == 0
    assert server.stdout.count("agentskit-chat stopped") == 1
    wait_gone(workers)


def draining(server: Server) -> set[int]:
    """The pids of workers that logged the start of their drain."""
    return {r["pid"] for r in server.records() if r.get("event", "").startswith("stopping:")}


DEFINITION = """\
id: desk
revision: 1
description: {description}
model: {{adapter: offline}}
conversation:
  initial: idle
  states:
    idle: {{on: {{start: done}}}}
    done: {{}}
  routes:
    - {{id: start, command: /start, event: start, response: "Started."}}
"""


def test_sighup_reloads_every_worker(launch: Launcher, tmp_path: Path) -> None:
    definitions = tmp_path / "definitions"
    definitions.mkdir()
    (definitions / "desk.yaml").write_text(DEFINITION.format(description="first"))
    args = ("--definitions", str(definitions), "--workers", "2")
    server = launch(tmp_path / "state", *args, log_level="INFO")
    workers = set(workers_of(server, 2).values())

    (definitions / "desk.yaml").write_text(DEFINITION.format(description="second"))
    server.send(signal.SIGHUP)
    deadline = time.monotonic() + 30
    while {r["pid"] for r in server.records("definitions reloaded: updated desk")} != workers:
        assert time.monotonic() < deadline, server.stdout
        time.sleep(0.05)

    async def scenario() -> None:
        async with clients(server.target) as opened:
            seen = {(await c.get_definition("desk")).description for c in opened}
            assert seen == {"second"}

    asyncio.run(scenario())
    server.send(signal.SIGTERM)
    assert server.wait() == 0


def test_a_killed_parent_takes_its_workers_with_it(launch: Launcher, tmp_path: Path) -> None:
    server = launch(tmp_path / "state", "--workers", "2", log_level="INFO")
    workers = workers_of(server, 2).values()
    server.process.kill()
    server.process.wait()
    wait_gone(workers)


def test_workers_refuse_a_store_they_cannot_share(launch: Launcher, tmp_path: Path) -> None:
    server = launch(None, "--store", "memory://", "--workers", "2", wait=False)
    assert server.wait() == 2
    assert "--workers needs a store the workers share" in server.stderr
    assert "listening on" not in server.stdout


def test_workers_refuse_a_metrics_endpoint_of_one_process(launch: Launcher, tmp_path: Path) -> None:
    server = launch(
        tmp_path / "state", "--workers", "2", "--metrics-listen", "127.0.0.1:0", wait=False
    )
    assert server.wait() == 2
    assert "--metrics-listen serves one process's metrics" in server.stderr
    assert "listening on" not in server.stdout
    assert not (tmp_path / "state" / "sessions.db").exists()


def test_a_taken_port_fails_loudly_both_ways(launch: Launcher, tmp_path: Path) -> None:
    single = launch(tmp_path / "one")
    group = launch(tmp_path / "two", "--listen", single.target, "--workers", "2", wait=False)
    assert group.wait() == 2
    assert f"cannot listen on {single.target}" in group.stderr

    workers = launch(tmp_path / "three", "--workers", "2")
    with socket.create_connection(("127.0.0.1", workers.port)):
        pass
    second = launch(tmp_path / "four", "--listen", workers.target, wait=False)
    assert second.wait() != 0
    assert "listening on" not in second.stdout
    second_group = launch(
        tmp_path / "five", "--listen", workers.target, "--workers", "2", wait=False
    )
    assert second_group.wait() == 2


def test_a_configuration_error_is_reported_once_and_nothing_is_stored(
    launch: Launcher, tmp_path: Path
) -> None:
    broken = Path(__file__).resolve().parent / "fixtures" / "broken"
    state = tmp_path / "state"
    server = launch(state, "--definitions", str(broken), "--workers", "3", wait=False)
    assert server.wait() == 2
    assert server.stderr.count("definition errors:") == 1  # the first worker alone started
    assert "listening on" not in server.stdout
    assert not (state / "sessions.db").exists()
