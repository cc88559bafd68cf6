"""A server killed mid-turn: the store keeps exactly the committed turns, the lease lapses."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Sequence
from pathlib import Path

import grpc
import pytest

from agentskit_chat_client import (
    ChatClient,
    ChatError,
    Retry,
    SessionHistory,
    Submit,
    TurnCompleted,
    TurnDecision,
    TurnEvent,
)
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import (
    Gate,
    Server,
    collect,
    complete_when_free,
    slow_args,
    terminal,
)

SHORT_TURNS = ("--turn-timeout", "2", "--lease-ttl", "3")


def decision_of(events: Sequence[TurnEvent]) -> TurnDecision:
    found = [e for e in events if isinstance(e, TurnDecision)]
    assert len(found) == 1, events
    return found[0]


def test_sigkill_mid_turn_keeps_committed_turns_and_lets_the_lease_lapse(
    launch: Launcher, gate: Gate, tmp_path: Path
) -> None:
    state_dir = tmp_path / "state"
    args = slow_args(*SHORT_TURNS)
    first_server = launch(state_dir, *args, env=gate.env)

    async def before_crash(server: Server) -> tuple[str, SessionHistory]:
        async with ChatClient(server.target, timeout=30) as client:
            session = await client.create_session("slow")
            sid = session.session_id
            assert session.snapshot.state == "one"
            gate.open()
            done = terminal(await collect(client, sid, Submit("first", message_id="u1")))
            assert isinstance(done, TurnCompleted), done
            assert done.snapshot.state == "two"
            committed = await client.get_session(sid)
            assert [m.id for m in committed.messages] == ["u1", done.assistant_message_id]
            assert gate.calls() == ["u1"]

            gate.close()
            stream = asyncio.ensure_future(collect(client, sid, Submit("second", message_id="u2")))
            await gate.wait_calls(2)
            assert not stream.done()
            server.send(signal.SIGKILL)
            with pytest.raises(ChatError) as killed:
                await stream
            assert killed.value.code == grpc.StatusCode.UNAVAILABLE
            return sid, committed

    sid, committed = asyncio.run(before_crash(first_server))
    assert first_server.wait() == -signal.SIGKILL
    assert "agentskit-chat stopped" not in first_server.stdout

    second_server = launch(state_dir, *args, env=gate.env)

    async def after_restart(server: Server) -> None:
        async with ChatClient(server.target, timeout=30) as client:
            loaded = await client.get_session(sid)
            assert loaded.messages == committed.messages
            assert loaded.session.snapshot == committed.session.snapshot
            # The only store write of the killed turn is its lease claim.
            assert loaded.session.cursor == committed.session.cursor + 1
            assert "second" not in [m.content for m in loaded.messages]

            with pytest.raises(ChatError) as busy:
                await collect(client, sid, Submit("too early", message_id="u3"))
            assert busy.value.code == grpc.StatusCode.ABORTED
            assert busy.value.reason == "ERROR_REASON_SESSION_BUSY"
            assert busy.value.retry_after_ms is not None
            assert await client.get_session(sid) == loaded

            gate.open()
            events, _ = await complete_when_free(client, sid, Submit("third", message_id="u3"))
            done = terminal(events)
            assert isinstance(done, TurnCompleted), events
            decision = decision_of(events)
            assert (decision.route_id, decision.from_state, decision.to_state) == (
                "step",
                "two",
                "three",
            )
            assert not decision.replayed
            calls = gate.calls()
            assert calls == ["u1", "u2", "u3"]

            history = await client.get_session(sid)
            assert [(m.id, m.role) for m in history.messages] == [
                *[(m.id, m.role) for m in committed.messages],
                ("u3", "user"),
                (done.assistant_message_id, "assistant"),
            ]
            assert history.session.snapshot.state == "three"
            assert history.session.cursor > committed.session.cursor

            retried = await collect(client, sid, Retry())
            again = terminal(retried)
            assert isinstance(again, TurnCompleted), retried
            replay = decision_of(retried)
            assert replay.replayed
            assert (replay.route_id, replay.from_state, replay.to_state) == (
                "step",
                "two",
                "three",
            )
            assert again.content == done.content
            assert gate.calls() == calls
            final = await client.get_session(sid)
            assert [m.id for m in final.messages][:3] == [m.id for m in history.messages][:3]
            assert len(final.messages) == 4
            assert final.session.snapshot.state == "three"

    asyncio.run(after_restart(second_server))
    second_server.send(signal.SIGTERM)
    assert second_server.wait() == 0
