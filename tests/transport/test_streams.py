"""Calls on one connection: below the stream limit none fails, past it they wait."""

from __future__ import annotations

import asyncio
import subprocess
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc

from agentskit_chat.transport import ConnectionLimits
from agentskit_chat_client import ChatClient, ChatError, Submit
from tests.cli.fixtures.serving import Server, base_env, command

from .conftest import live, run

LIMIT = 100


@contextmanager
def serving(tmp_path: Path, *args: str) -> Iterator[Server]:
    """`serve` in a process of its own: the server's event loop is not the client's."""
    stderr_path = tmp_path / "serve.stderr"
    stderr = stderr_path.open("wb")
    argv = ["serve", "--listen", "127.0.0.1:0", "--state-dir", str(tmp_path), *args]
    process = subprocess.Popen(
        command(*argv),
        env=base_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        bufsize=0,
    )
    server = Server(process, stderr, stderr_path)
    try:
        server.wait_listening()
        yield server
    finally:
        server.close()


def one_connection(target: str) -> ChatClient:
    """A client on a connection of its own (channels of one process share them otherwise)."""
    channel = grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
    return ChatClient(channel, timeout=60)


async def failures(
    calls: int, concurrency: int, call: Callable[[int], Awaitable[object]]
) -> Counter[str]:
    """Run `calls` calls, `concurrency` at a time (`call(worker)`); the errors by code."""
    failed: Counter[str] = Counter()
    queue = iter(range(calls))

    async def worker(index: int) -> None:
        for _ in queue:
            try:
                await call(index)
            except ChatError as error:
                failed[error.code.name] += 1

    await asyncio.gather(*(worker(index) for index in range(concurrency)))
    return failed


def test_calls_below_the_stream_limit_of_one_connection_never_fail(tmp_path: Path) -> None:
    async def scenario(target: str) -> None:
        concurrency = 90
        client = one_connection(target)
        try:
            sessions = [
                (await client.create_session("support")).session_id for _ in range(concurrency)
            ]

            async def call(worker: int) -> object:
                if worker % 2:
                    return await client.list_definitions()
                return await client.run_turn(sessions[worker], Submit("hello"))

            assert await failures(2000, concurrency, call) == Counter()
        finally:
            await client.close()

    flags = ("--store", "memory://", "--insecure-no-auth", "--max-streams-per-connection")
    with serving(tmp_path, *flags, str(LIMIT)) as server:
        run(scenario(server.target))


def test_calls_past_the_stream_limit_wait_instead_of_failing(tmp_path: Path) -> None:
    async def scenario() -> None:
        connections = ConnectionLimits(max_streams_per_connection=LIMIT)
        async with live(tmp_path, connections=connections) as env:
            client = one_connection(env.target)
            try:
                concurrency = 3 * LIMIT
                sessions = [
                    (await client.create_session("probe")).session_id for _ in range(concurrency)
                ]

                async def call(worker: int) -> object:
                    return await client.run_turn(sessions[worker], Submit("hello"))

                assert await failures(2 * concurrency, concurrency, call) == Counter()
            finally:
                await client.close()

    run(scenario())
