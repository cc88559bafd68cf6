"""SIGTERM: health goes NOT_SERVING, new turns are refused, in-flight turns get the grace."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

from agentskit_chat_client import (
    ChatClient,
    ChatError,
    Submit,
    TextDelta,
    TurnCompleted,
    TurnDecision,
    TurnStarted,
)
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import (
    Gate,
    Server,
    collect,
    complete_when_free,
    health_status,
    slow_args,
    terminal,
)
from tests.waiting import EVENT_WAIT

CHAT_SERVICE = "agentskit.chat.v1.ChatService"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def wait_not_serving(target: str, service: str, timeout: float = EVENT_WAIT) -> None:
    deadline = time.monotonic() + timeout
    while await health_status(target, service) != NOT_SERVING:
        assert time.monotonic() < deadline, "health never reported NOT_SERVING"
        await asyncio.sleep(0.02)


def test_sigterm_refuses_new_turns_and_lets_the_turn_in_flight_finish(
    launch: Launcher, gate: Gate, tmp_path: Path
) -> None:
    server = launch(tmp_path / "state", *slow_args(), env=gate.env)

    async def scenario() -> None:
        assert await health_status(server.target) == SERVING
        assert await health_status(server.target, CHAT_SERVICE) == SERVING
        async with ChatClient(server.target, timeout=30) as client:
            busy = await client.create_session("slow")
            other = await client.create_session("slow")
            in_flight = asyncio.ensure_future(
                collect(client, busy.session_id, Submit("slow", message_id="u1"))
            )
            await gate.wait_calls(1)

            server.send(signal.SIGTERM)
            await wait_not_serving(server.target, "")
            await wait_not_serving(server.target, CHAT_SERVICE)
            with pytest.raises(ChatError) as refused:
                await collect(client, other.session_id, Submit("refused", message_id="v1"))
            assert refused.value.code == grpc.StatusCode.UNAVAILABLE
            assert refused.value.reason == "ERROR_REASON_SHUTTING_DOWN"
            assert gate.calls() == ["u1"]
            assert not in_flight.done()
            assert server.process.poll() is None

            gate.open()
            events = await in_flight
            assert [type(e) for e in events] == [
                TurnStarted,
                TurnDecision,
                TextDelta,
                TurnCompleted,
            ]
            done = terminal(events)
            assert isinstance(done, TurnCompleted)
            assert done.content == "Stepped."
            assert done.snapshot.state == "two"

    asyncio.run(scenario())
    assert server.wait() == 0
    assert "agentskit-chat stopped" in server.stdout
    assert gate.calls() == ["u1"]


def test_sigterm_with_a_turn_longer_than_the_grace_still_exits_and_frees_the_session(
    launch: Launcher, gate: Gate, tmp_path: Path
) -> None:
    state_dir = tmp_path / "state"
    args = slow_args("--grace", "0.5", "--turn-timeout", "2", "--lease-ttl", "3")
    server = launch(state_dir, *args, env=gate.env)

    async def before(server: Server) -> str:
        async with ChatClient(server.target, timeout=30) as client:
            session = await client.create_session("slow")
            stream = asyncio.ensure_future(
                collect(client, session.session_id, Submit("slow", message_id="u1"))
            )
            await gate.wait_calls(1)
            server.send(signal.SIGTERM)
            assert await server.wait_async() == 0
            with pytest.raises(ChatError):
                await stream
            return session.session_id

    sid = asyncio.run(before(server))
    assert "agentskit-chat stopped" in server.stdout

    restarted = launch(state_dir, *args, env=gate.env)

    async def after(server: Server) -> None:
        async with ChatClient(server.target, timeout=30) as client:
            loaded = await client.get_session(sid)
            assert loaded.messages == ()
            assert loaded.session.snapshot.state == "one"
            gate.open()
            events, _ = await complete_when_free(client, sid, Submit("again", message_id="u2"))
            done = terminal(events)
            assert isinstance(done, TurnCompleted), events
            assert done.snapshot.state == "two"
            history = await client.get_session(sid)
            assert [m.id for m in history.messages] == ["u2", done.assistant_message_id]

    asyncio.run(after(restarted))
    restarted.send(signal.SIGTERM)
    assert restarted.wait() == 0


def test_a_turn_cut_off_at_the_end_of_the_grace_releases_its_lease(
    launch: Launcher, gate: Gate, tmp_path: Path
) -> None:
    """The lease would last 75 s: the first turn after the restart runs only if it was released.

    The handler takes 0.3 s to unwind its cancellation, so the release comes after the
    gRPC server has stopped and must still reach the store.
    """
    state_dir = tmp_path / "state"
    args = slow_args("--grace", "0.5")
    server = launch(state_dir, *args, env={**gate.env, "SLOW_CHAT_LINGER": "0.3"})

    async def before(server: Server) -> str:
        async with ChatClient(server.target, timeout=30) as client:
            session = await client.create_session("slow")
            stream = asyncio.ensure_future(
                collect(client, session.session_id, Submit("slow", message_id="u1"))
            )
            await gate.wait_calls(1)
            server.send(signal.SIGTERM)
            assert await server.wait_async() == 0
            with pytest.raises(ChatError):
                await stream
            return session.session_id

    sid = asyncio.run(before(server))
    restarted = launch(state_dir, *args, env=gate.env)

    async def after(server: Server) -> None:
        async with ChatClient(server.target, timeout=30) as client:
            gate.open()
            done = terminal(await collect(client, sid, Submit("again", message_id="u2")))
            assert isinstance(done, TurnCompleted)

    asyncio.run(after(restarted))
    restarted.send(signal.SIGTERM)
    assert restarted.wait() == 0
