"""Streams of one connection: below the stream limit no call fails, past it calls wait; a
stream whose client stops reading ends with a status the client sees."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import struct
import subprocess
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import h2.config
import h2.connection
import h2.events
import h2.settings
import pytest
from google.rpc import error_details_pb2, status_pb2

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.service import Limits
from agentskit_chat.transport import ConnectionLifetime, ConnectionLimits
from agentskit_chat_client import ChatClient, ChatError, Submit
from tests.cli.fixtures.serving import Server, base_env, command
from tests.waiting import EVENT_WAIT

from .conftest import live, once_released, run
from .test_limits import MiB, stalled_turn

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


STALL_LIMITS = Limits(
    turn_timeout=1.0,
    lease_ttl=60.0,
    max_output_bytes=3 * MiB + MiB // 2,
    max_history_bytes=1000,
    max_history_messages=10,
)


async def read_all(call: Any, into: list[pb.StreamTurnResponse]) -> None:
    async for response in call:
        into.append(response)


def test_a_client_that_reads_again_after_a_stall_gets_a_status_not_a_hang(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with live(tmp_path, limits=STALL_LIMITS) as env:
            sid = (await env.client.create_session("probe")).session_id
            channel, call = await stalled_turn(env.target, sid)
            try:
                # The server gives the turn up at its timeout: the session is free again.
                assert (await once_released(env.client, sid, "hello")).text == "model answer"
                responses: list[pb.StreamTurnResponse] = []
                with pytest.raises(grpc.aio.AioRpcError) as caught:  # the call has no deadline
                    await asyncio.wait_for(read_all(call, responses), EVENT_WAIT)
                assert responses, "the events sent before the stall were lost"
                error = caught.value
                assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                assert "not reading" in (error.details() or "")
                details = dict(error.trailing_metadata() or ())["grpc-status-details-bin"]
                status = status_pb2.Status.FromString(details)
                info = error_details_pb2.ErrorInfo()
                assert status.details[0].Unpack(info)
                assert info.reason == "ERROR_REASON_DEADLINE_EXCEEDED"
            finally:
                call.cancel()
                await channel.close()

    run(scenario())


def test_a_client_that_reads_again_while_its_stalled_turn_closes_gets_a_status(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The client reads again while the stalled turn still releases its lease (another
    writer holds the database): it gets its events and DEADLINE_EXCEEDED, and the server
    logs no error."""

    async def scenario() -> None:
        # The release waits on the lock as long as the test holds it, however slow the machine.
        async with live(tmp_path, limits=STALL_LIMITS, busy_timeout_ms=600_000) as env:
            sid = (await env.client.create_session("probe")).session_id
            channel, call = await stalled_turn(env.target, sid)
            writer = sqlite3.connect(env.db_path, isolation_level=None)
            try:
                while env.probe.flooded == 0:
                    await asyncio.sleep(0.01)
                writer.execute("BEGIN IMMEDIATE")  # the turn's release will wait for it
                async with asyncio.timeout(EVENT_WAIT):
                    while "turn stream stalled" not in caplog.text:
                        await asyncio.sleep(0.01)
                # The turn is closing: its release cannot end while the lock is held.
                assert env.service.turns.in_flight == 1
                responses: list[pb.StreamTurnResponse] = []
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await asyncio.wait_for(read_all(call, responses), EVENT_WAIT)
                assert responses, "the events sent before the stall were lost"
                assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                assert "not reading" in (caught.value.details() or "")
                writer.execute("COMMIT")
                assert (await once_released(env.client, sid, "hello")).text == "model answer"
            finally:
                writer.close()
                call.cancel()
                await channel.close()
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert errors == []

    with caplog.at_level(logging.WARNING):
        run(scenario())


@dataclass
class Wire:
    """What a raw HTTP/2 client that never reads saw of its StreamTurn call."""

    data_bytes: int = 0
    trailers: dict[bytes, bytes] = field(default_factory=dict)
    reset: int | None = None
    goaway: bool = False
    closed: bool = False

    @property
    def ended(self) -> bool:
        return bool(self.trailers) or self.reset is not None or self.goaway or self.closed


def grpc_frame(message: pb.StreamTurnRequest) -> bytes:
    body = message.SerializeToString()
    return b"\0" + struct.pack(">I", len(body)) + body


async def never_reading(port: int, session_id: str, *headers: tuple[str, str]) -> Wire:
    """Start a turn from a raw HTTP/2 client with a 1 KiB stream window that it never
    reopens; what it sees until the stream or the connection ends (or 30 s pass)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    config = h2.config.H2Configuration(client_side=True, header_encoding=None)
    connection = h2.connection.H2Connection(config)
    connection.initiate_connection()
    connection.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1024})
    stream_id = connection.get_next_available_stream_id()
    request = pb.StreamTurnRequest(
        session_id=session_id, turn_id="stalled", submit=pb.SubmitOperation(content="/flood 60000")
    )
    connection.send_headers(
        stream_id,
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/agentskit.chat.v1.ChatService/StreamTurn"),
            (":authority", f"127.0.0.1:{port}"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            *headers,
        ],
    )
    connection.send_data(stream_id, grpc_frame(request), end_stream=True)
    wire = Wire()
    pending = b""
    try:
        async with asyncio.timeout(30):
            while not wire.ended:
                writer.write(connection.data_to_send())
                data = await reader.read(65536)
                if not data:
                    wire.closed = True
                    break
                pending += data
                while len(pending) >= 9 and len(pending) >= 9 + int.from_bytes(pending[:3]):
                    size = 9 + int.from_bytes(pending[:3])
                    frame, pending = pending[:size], pending[size:]
                    for event in connection.receive_data(frame):
                        if isinstance(event, h2.events.DataReceived):
                            wire.data_bytes += len(event.data)  # never acknowledged
                        elif isinstance(event, h2.events.TrailersReceived):
                            wire.trailers = dict(event.headers)
                        elif isinstance(event, h2.events.StreamReset):
                            wire.reset = event.error_code
                        elif isinstance(event, h2.events.ConnectionTerminated):
                            wire.goaway = True
                    if wire.ended:
                        break
    except TimeoutError:
        pass
    finally:
        writer.close()
    return wire


def test_a_stalled_stream_ends_on_the_wire_at_the_clients_deadline(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path, limits=STALL_LIMITS) as env:
            sid = (await env.client.create_session("probe")).session_id
            started = time.monotonic()
            wire = await never_reading(env.server.port, sid, ("grpc-timeout", "3S"))
            assert 0 < wire.data_bytes <= 1024, "the client's window was not respected"
            assert wire.trailers.get(b"grpc-status") == b"4" or wire.reset is not None, wire
            assert time.monotonic() - started < 20
            assert (await once_released(env.client, sid, "hello")).text == "model answer"

    run(scenario())


def test_a_stalled_stream_without_a_deadline_ends_with_its_connections_age(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        lifetime = ConnectionLifetime(max_age_seconds=2.0, max_age_grace_seconds=1.0)
        async with live(tmp_path, limits=STALL_LIMITS, lifetime=lifetime) as env:
            sid = (await env.client.create_session("probe")).session_id
            started = time.monotonic()
            wire = await never_reading(env.server.port, sid)
            assert 0 < wire.data_bytes <= 1024, "the client's window was not respected"
            assert wire.goaway or wire.closed or wire.reset is not None, wire
            assert time.monotonic() - started < 20
            assert (await once_released(env.client, sid, "hello")).text == "model answer"

    run(scenario())
