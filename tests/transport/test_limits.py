"""Nothing unbounded: answer size, clients that stop reading, connections and responses."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.service import Limits
from agentskit_chat.transport import ConnectionLimits
from agentskit_chat_client import ChatClient, ChatError, Submit, TurnFailed
from tests.waiting import EVENT_WAIT, until

from .conftest import live, once_released, refused, run

MiB = 1024 * 1024


def test_an_answer_over_the_output_limit_fails_and_commits_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        limits = Limits(max_output_bytes=64 * 1024)
        async with live(tmp_path, limits=limits) as env:
            sid = (await env.client.create_session("probe")).session_id
            before = env.dump()
            events = [e async for e in env.client.stream_turn(sid, Submit("/flood 5000"))]
            failed = events[-1]
            assert isinstance(failed, TurnFailed)
            assert failed.code == "output_limit"
            assert failed.retryable is False
            assert "xxxxxxxxxx" not in failed.message
            await asyncio.wait_for(env.probe.model_closed.wait(), 60)
            assert env.probe.flooded <= 64 * 1024 + 5000
            # Only the failure is recorded: no message, the same state.
            view = await env.client.get_session(sid)
            assert view.messages == ()
            assert env.raw("SELECT count(*) FROM messages") == [(0,)]
            assert len(env.dump()) == len(before)
            ok = await env.client.run_turn(sid, Submit("hello"))
            assert ok.text == "model answer"

    run(scenario())


def test_the_default_limits_keep_every_response_under_the_stock_receive_limit() -> None:
    assert Limits().largest_response() < 4 * MiB
    assert Limits().max_output_bytes == MiB
    with pytest.raises(ValueError, match="exceed"):
        Limits(max_output_bytes=3 * MiB)


async def stalled_turn(target: str, session_id: str) -> tuple[grpc.aio.Channel, Any]:
    """Start a turn on a channel whose client never reads (small windows, no BDP)."""
    channel = grpc.aio.insecure_channel(
        target,
        options=[("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 1024)],
    )
    stream: Any = channel.unary_stream(
        "/agentskit.chat.v1.ChatService/StreamTurn",
        request_serializer=pb.StreamTurnRequest.SerializeToString,
        response_deserializer=pb.StreamTurnResponse.FromString,
    )
    request = pb.StreamTurnRequest(
        session_id=session_id, turn_id="stalled", submit=pb.SubmitOperation(content="/flood 60000")
    )
    call = stream(request)
    await call.initial_metadata()
    return channel, call


def test_a_client_that_stops_reading_frees_the_session_at_the_turn_timeout(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        limits = Limits(
            turn_timeout=1.0,
            lease_ttl=600.0,
            max_output_bytes=3 * MiB + MiB // 2,
            max_history_bytes=1000,
            max_history_messages=10,
        )
        async with live(tmp_path, limits=limits) as env:
            sid = (await env.client.create_session("probe")).session_id
            channel, call = await stalled_turn(env.target, sid)
            try:
                started = time.monotonic()
                await until(lambda: env.probe.flooded > 0, "the model's first chunk")
                result = await once_released(env.client, sid, "hello")
                assert result.text == "model answer"
                assert time.monotonic() - started < EVENT_WAIT  # not the 600 s lease
                assert env.service.turns.in_flight == 0
                # The turn is over, its model stream closed: had the stream not waited for
                # the client, the model would have streamed up to the output limit.
                assert env.probe.model_closed.is_set()
                assert env.probe.flooded < limits.max_output_bytes, (
                    "the stream never waited for the client"
                )
                # The server ended the stalled call: a drain does not wait out its grace for it.
                draining = time.monotonic()
                await env.server.drain(600)
                assert time.monotonic() - draining < EVENT_WAIT
            finally:
                call.cancel()
                await channel.close()

    run(scenario())


def own_connection(target: str) -> ChatClient:
    """A client on a connection of its own (channels of one process share them otherwise)."""
    channel = grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
    return ChatClient(channel, timeout=5)


def test_connections_past_the_limit_are_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        connections = ConnectionLimits(max_connections=2)
        async with live(tmp_path, connections=connections) as env:
            first, second, third = (own_connection(env.target) for _ in range(3))
            try:
                await first.list_definitions()
                await second.list_definitions()
                with pytest.raises(ChatError) as caught:
                    await third.list_definitions()
                assert caught.value.code == grpc.StatusCode.UNAVAILABLE
                await first.channel.close()
                give_up = time.monotonic() + EVENT_WAIT
                while True:  # the server notices the closed connection on its own time
                    again = own_connection(env.target)
                    try:
                        assert await again.list_definitions()
                        break
                    except ChatError:
                        assert time.monotonic() < give_up, "a closed connection still counted"
                        await asyncio.sleep(0.05)
                    finally:
                        await again.channel.close()
            finally:
                for client in (first, second, third):
                    await client.channel.close()

    run(scenario())


def test_calls_past_the_stream_limit_of_a_connection_wait_their_turn(tmp_path: Path) -> None:
    async def scenario() -> None:
        connections = ConnectionLimits(max_streams_per_connection=1)
        async with live(tmp_path, connections=connections) as env:
            sid = (await env.client.create_session("probe")).session_id
            slow = asyncio.ensure_future(env.client.run_turn(sid, Submit("/wait")))
            await asyncio.wait_for(env.probe.entered.wait(), 60)
            with pytest.raises(ChatError) as caught:
                await env.client.list_definitions(timeout=0.5)
            assert caught.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
            other = own_connection(env.target)  # another connection is not held up
            try:
                assert await other.list_definitions()
            finally:
                await other.channel.close()
            env.probe.gate.set()
            assert (await slow).text == "waited"
            assert await env.client.list_definitions()

    run(scenario())


def test_an_idle_connection_is_closed(tmp_path: Path) -> None:
    async def scenario() -> None:
        connections = ConnectionLimits(max_idle_seconds=0.3)
        async with live(tmp_path, connections=connections) as env:
            await env.client.list_definitions()
            channel = env.client.channel
            assert channel.get_state() == grpc.ChannelConnectivity.READY
            await until(
                lambda: channel.get_state() != grpc.ChannelConnectivity.READY,
                "the idle connection's close",
            )
            assert channel.get_state() == grpc.ChannelConnectivity.IDLE
            assert await env.client.list_definitions()  # it reconnects on the next call

    run(scenario())


def test_a_history_at_its_limits_still_reads_back_through_a_stock_client(tmp_path: Path) -> None:
    async def scenario() -> None:
        limits = Limits()
        async with live(tmp_path, limits=limits) as env:
            sid = (await env.client.create_session("probe")).session_id
            text = "z" * limits.max_input_bytes
            turns = limits.max_history_bytes // limits.max_input_bytes - 1
            for _ in range(turns):
                await env.client.run_turn(sid, Submit(text))
            full = await refused(env.client.stream_turn(sid, Submit(text)))
            assert full.metadata["limit"] == "history_bytes"
            last = await env.client.run_turn(sid, Submit(f"/fill {limits.max_output_bytes}"))
            assert last.text is not None
            assert len(last.text) == limits.max_output_bytes
            view = await env.client.get_session(sid)  # default 4 MiB receive limit
            size = sum(len(m.content) for m in view.messages)
            assert size > limits.max_history_bytes
            raw = pb.GetSessionResponse(
                messages=[pb.Message(id=m.id, content=m.content) for m in view.messages]
            )
            assert raw.ByteSize() < limits.largest_response() < 4 * MiB

    run(scenario())


def closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closes `sock` (EOF or reset) within `timeout` seconds."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65_536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def test_sockets_that_never_handshake_are_closed_and_free_their_places(tmp_path: Path) -> None:
    """Connections that never send the HTTP/2 preface hold places under --max-connections
    only until the handshake timeout; then a real client gets through."""

    async def scenario() -> None:
        connections = ConnectionLimits(max_connections=3, handshake_seconds=0.5)
        async with live(tmp_path, connections=connections) as env:
            port = int(env.target.rsplit(":", 1)[1])
            silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
            try:
                for sock in silent:  # grpcio's own timeout would keep them for minutes
                    assert await asyncio.to_thread(closed_by_peer, sock, 20)
                give_up = time.monotonic() + EVENT_WAIT
                while True:  # the server counts the closed connections out
                    client = own_connection(env.target)
                    try:
                        assert await client.list_definitions()
                        break
                    except ChatError:
                        assert time.monotonic() < give_up, "silent connections still hold places"
                        await asyncio.sleep(0.05)
                    finally:
                        await client.channel.close()
            finally:
                for sock in silent:
                    sock.close()

    run(scenario())
