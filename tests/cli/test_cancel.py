"""A client that goes away mid-turn: the server releases the lease and commits nothing."""

from __future__ import annotations

import asyncio
import signal
import time
from contextlib import aclosing
from dataclasses import replace
from pathlib import Path

from agentskit_chat_client import ChatClient, SessionHistory, Submit, TurnCompleted, TurnStarted
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import Gate, collect, slow_args, terminal
from tests.waiting import EVENT_WAIT


async def wait_for_cursor(
    client: ChatClient, session_id: str, cursor: int, timeout: float = EVENT_WAIT
) -> SessionHistory:
    deadline = time.monotonic() + timeout
    while (loaded := await client.get_session(session_id)).session.cursor < cursor:
        assert time.monotonic() < deadline, loaded
        await asyncio.sleep(0.02)
    assert loaded.session.cursor == cursor, loaded
    return loaded


def test_a_cancelled_stream_releases_the_lease_so_the_turn_can_run_again(
    launch: Launcher, gate: Gate, tmp_path: Path
) -> None:
    server = launch(tmp_path / "state", *slow_args(), env=gate.env)
    operation = Submit("abandoned", message_id="u1")

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            session = await client.create_session("slow")
            sid = session.session_id
            before = await client.get_session(sid)
            stream = client.stream_turn(sid, operation, turn_id="turn-1")
            async with aclosing(stream):
                first = await anext(stream)
                assert isinstance(first, TurnStarted)
                await gate.wait_calls(1)

            released = await wait_for_cursor(client, sid, before.session.cursor + 2)
            assert released.messages == ()
            assert released.session.snapshot == before.session.snapshot

            gate.open()
            events = await collect(client, sid, operation, turn_id="turn-1")
            started = events[0]
            assert isinstance(started, TurnStarted)
            assert not started.duplicate
            done = terminal(events)
            assert isinstance(done, TurnCompleted), events
            assert done.snapshot.state == "two"
            assert gate.calls() == ["u1", "u1"]
            history = await client.get_session(sid)
            assert [m.id for m in history.messages] == ["u1", done.assistant_message_id]

            repeated = await collect(client, sid, operation, turn_id="turn-1")
            started = repeated[0]
            assert isinstance(started, TurnStarted)
            assert started.duplicate
            assert terminal(repeated) == replace(
                done, sequence=repeated[-1].sequence, time=repeated[-1].time
            )
            assert gate.calls() == ["u1", "u1"]
            assert await client.get_session(sid) == history

    asyncio.run(scenario())
    server.send(signal.SIGTERM)
    assert server.wait() == 0
