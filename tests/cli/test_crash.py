"""A server killed mid-turn: the store keeps exactly the committed turns, the lease lapses."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

import grpc

from agentskit_chat_client import (
    ChatClient,
    ChatError,
    Retry,
    SessionHistory,
    Submit,
    TurnCompleted,
    TurnDecision,
    TurnEvent,
    TurnFailed,
)
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import (
    Gate,
    Server,
    collect,
    complete_when_free,
    ended_by,
    slow_args,
    terminal,
)

LEASES = (3.0, 6.0, 12.0, 24.0, 48.0)
"""Lease lengths tried in turn (each turn timeout a second shorter): the killed turn's lease
must outlast the restart for the refusal to be checked, and a busy machine restarts more
slowly. The refusal check itself is by the turns' recorded start times, not by a pause."""


def decision_of(events: Sequence[TurnEvent]) -> TurnDecision:
    found = [e for e in events if isinstance(e, TurnDecision)]
    assert len(found) == 1, events
    return found[0]


def test_sigkill_mid_turn_keeps_committed_turns_and_lets_the_lease_lapse(
    launch: Launcher, tmp_path: Path
) -> None:
    for round_, lease in enumerate(LEASES):
        if crash_and_restart(launch, tmp_path / f"round-{round_}", lease):
            return
    raise AssertionError("the killed turn's lease never outlasted the restart")


def crash_and_restart(launch: Launcher, folder: Path, lease: float) -> bool:
    """The scenario with leases of `lease` seconds; False when the machine was too slow for
    it to check anything: the killed turn timed out before the kill, or its lease had
    lapsed (as the server's own times show) before the restarted server was asked."""
    state_dir = folder / "state"
    (folder / "gate").mkdir(parents=True)
    gate = Gate(folder / "gate")
    args = slow_args("--turn-timeout", str(lease - 1), "--lease-ttl", str(lease))
    first_server = launch(state_dir, *args, env=gate.env)

    async def before_crash(server: Server) -> tuple[str, SessionHistory, datetime] | None:
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
            second = Submit("second", message_id="u2")
            stream = asyncio.ensure_future(collect(client, sid, second, turn_id="second"))
            await gate.wait_calls(2)
            running = await client.get_turn(sid, "second")
            server.send(signal.SIGKILL)
            ended = await ended_by(stream)
            if not isinstance(ended, ChatError):  # it timed out before the kill reached it
                timed_out = terminal(ended)
                assert isinstance(timed_out, TurnFailed), ended
                assert timed_out.code == "deadline_exceeded", ended
                return None
            assert ended.code == grpc.StatusCode.UNAVAILABLE
            if running.outcome != "running":
                return None  # it timed out before it was asked about
            assert running.start_time is not None
            return sid, committed, running.start_time

    crashed = asyncio.run(before_crash(first_server))
    assert first_server.wait() == -signal.SIGKILL
    assert "agentskit-chat stopped" not in first_server.stdout
    if crashed is None:
        return False
    sid, committed, claimed_at = crashed
    lapses_at = claimed_at + timedelta(seconds=lease)  # the killed turn's lease

    second_server = launch(state_dir, *args, env=gate.env)

    async def after_restart(server: Server) -> bool:
        async with ChatClient(server.target, timeout=30) as client:
            loaded = await client.get_session(sid)
            assert loaded.messages == committed.messages
            assert loaded.session.snapshot == committed.session.snapshot
            # The only store write of the killed turn is its lease claim.
            assert loaded.session.cursor == committed.session.cursor + 1
            assert "second" not in [m.content for m in loaded.messages]

            early = Submit("too early", message_id="u3")
            busy = await ended_by(collect(client, sid, early, turn_id="too-early"))
            if not isinstance(busy, ChatError):  # it ran: right only once the lease lapsed
                ran = await client.get_turn(sid, "too-early")
                assert ran.start_time is not None
                assert ran.start_time >= lapses_at, (ran, lapses_at)
                return False
            assert busy.code == grpc.StatusCode.ABORTED
            assert busy.reason == "ERROR_REASON_SESSION_BUSY"
            assert busy.retry_after_ms is not None
            assert await client.get_session(sid) == loaded

            gate.open()
            events, _ = await complete_when_free(
                client, sid, Submit("third", message_id="u3"), timeout=lease + 60
            )
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
            return True

    checked = asyncio.run(after_restart(second_server))
    second_server.send(signal.SIGTERM)
    assert second_server.wait() == 0
    return checked
