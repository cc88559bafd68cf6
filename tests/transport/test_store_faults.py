"""Store faults under a running server end cleanly: SQLite locked by another connection, rows
deleted or damaged behind the server's cache, and a session usable again once the store is."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import grpc
import pytest

from agentskit_chat.service import Limits
from agentskit_chat_client import (
    Submit,
    TextDelta,
    TurnEvent,
    TurnFailed,
    TurnStarted,
)
from tests.waiting import EVENT_WAIT

from .conftest import CANARY, Live, live, refused, run
from .test_errors import assert_clean

CORRUPT = "ERROR_REASON_SESSION_CORRUPT"


def lock(env: Live) -> sqlite3.Connection:
    """A second connection holding the database's write lock until it rolls back."""
    blocker = sqlite3.connect(env.db_path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN EXCLUSIVE")
    return blocker


def unlock(blocker: sqlite3.Connection) -> None:
    blocker.execute("ROLLBACK")
    blocker.close()


async def run_locked_turn(
    env: Live, sid: str, *, open_gate: bool
) -> tuple[list[TurnEvent], sqlite3.Connection]:
    """Stream `/slow` as turn `t1`, locking the store once the model is streaming; with
    `open_gate` the model then finishes (the commit meets the lock), otherwise the turn
    deadline passes (recording the failure meets the lock). The store stays locked: the
    locking connection is returned with the events."""
    events: list[TurnEvent] = []

    async def turn() -> None:
        async for event in env.client.stream_turn(sid, Submit("/slow"), turn_id="t1"):
            events.append(event)

    running = asyncio.ensure_future(turn())
    await asyncio.wait_for(env.probe.entered.wait(), EVENT_WAIT)
    blocker = lock(env)
    try:
        if open_gate:
            env.probe.gate.set()
        await asyncio.wait_for(running, EVENT_WAIT)
    except BaseException:
        unlock(blocker)
        raise
    return events, blocker


@pytest.mark.parametrize("closing", ["commit", "failure record"])
def test_a_closing_write_the_store_refuses_ends_with_a_failed_event_and_frees_the_session(
    tmp_path: Path, closing: str
) -> None:
    """The lease lasts 75 s; the session is free again as soon as the store is, because the
    refused release is retried. Nothing is committed and the same turn id runs again."""
    limits = Limits() if closing == "commit" else Limits(turn_timeout=0.5, lease_ttl=75)

    async def scenario() -> None:
        async with live(tmp_path, limits=limits, busy_timeout_ms=50) as env:
            sid = (await env.client.create_session("probe")).session_id
            events, blocker = await run_locked_turn(env, sid, open_gate=closing == "commit")
            try:
                assert isinstance(events[0], TurnStarted)
                assert any(isinstance(e, TextDelta) for e in events)
                failed = events[-1]
                assert isinstance(failed, TurnFailed), events
                assert (failed.code, failed.retryable) == ("store_unavailable", True)
                # Waiting for the turns ends although the release is still being retried.
                await asyncio.wait_for(env.service.turns.wait_idle(), EVENT_WAIT)
                assert env.service.turns.releases.retrying == 1
                busy = await refused(env.client.stream_turn(sid, Submit("/count")))
                assert busy.reason == "ERROR_REASON_SESSION_BUSY"
            finally:
                unlock(blocker)
            await asyncio.wait_for(env.service.turns.releases.wait(), 60)
            assert (await env.client.get_session(sid)).messages == ()
            lost = await refused(env.client.get_turn(sid, "t1"))
            assert lost.reason == "ERROR_REASON_TURN_NOT_FOUND"
            env.probe.gate.set()
            again = await env.client.run_turn(sid, Submit("/slow"), turn_id="t1")
            assert again.ok
            assert [m.role for m in (await env.client.get_session(sid)).messages] == [
                "user",
                "assistant",
            ]

    run(scenario())


def test_a_drain_ends_while_a_release_is_still_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path, busy_timeout_ms=50) as env:
            sid = (await env.client.create_session("probe")).session_id
            events, blocker = await run_locked_turn(env, sid, open_gate=True)
            try:
                assert isinstance(events[-1], TurnFailed)
                await asyncio.wait_for(env.server.drain(0.2), 15)
                assert env.service.turns.releases.retrying == 0
            finally:
                unlock(blocker)

    run(scenario())


def test_a_record_damaged_behind_the_cache_is_refused_not_overwritten(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            await env.client.run_turn(sid, Submit("/start"))  # the server caches the session
            ((good,),) = env.raw("SELECT CAST(record AS BLOB) FROM sessions")
            env.raw("UPDATE sessions SET record = replace(record, 'collecting', 'complete')")
            damaged = env.stored_row(sid)
            for call in (
                env.client.stream_turn(sid, Submit(CANARY)),
                env.client.get_session(sid),
                env.client.stream_turn(sid, Submit("/name Ada")),
            ):
                error = await refused(call)
                assert_clean(error, grpc.StatusCode.FAILED_PRECONDITION, CORRUPT)
                assert error.metadata["code"] == "record_replay"
            assert env.stored_row(sid) == damaged
            env.raw("UPDATE sessions SET record = ?", good)  # repaired: usable, no restart
            result = await env.client.run_turn(sid, Submit("/name Ada"))
            assert result.completed is not None
            assert result.completed.snapshot.state == "complete"

    run(scenario())


def test_a_message_row_deleted_under_the_server_is_session_corrupt_until_repaired(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            await env.client.run_turn(sid, Submit("/start"))  # the server caches the history
            (row,) = env.raw("SELECT * FROM messages WHERE position = 1")
            env.raw("DELETE FROM messages WHERE position = 1")
            messages = env.raw("SELECT * FROM messages")
            # The cached history meets the store's at the commit; then the stored history is
            # read, and refused before anything is written.
            error = await refused(env.client.stream_turn(sid, Submit(CANARY)))
            assert_clean(error, grpc.StatusCode.FAILED_PRECONDITION, CORRUPT)
            assert error.metadata["code"] == "history_mismatch"
            assert env.raw("SELECT * FROM messages") == messages
            damaged = env.stored_row(sid)
            for call in (
                env.client.stream_turn(sid, Submit(CANARY)),
                env.client.get_session(sid),
                env.client.truncate_history(sid),
            ):
                error = await refused(call)
                assert_clean(error, grpc.StatusCode.FAILED_PRECONDITION, CORRUPT)
                assert error.metadata["code"] == "history_mismatch"
            assert env.stored_row(sid) == damaged
            env.raw("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)", *row)  # repaired
            result = await env.client.run_turn(sid, Submit("/name Ada"))
            assert result.completed is not None
            assert result.completed.snapshot.state == "complete"
            history = await env.client.get_session(sid)
            assert len(history.messages) == 4

    run(scenario())


def test_a_history_missing_an_earlier_row_is_refused_when_read(tmp_path: Path) -> None:
    async def scenario() -> str:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            await env.client.run_turn(sid, Submit("/start"))
            await env.client.run_turn(sid, Submit("/name Ada"))
            return sid

    sid = run(scenario())
    with sqlite3.connect(tmp_path / "sessions.db") as connection:
        connection.execute("DELETE FROM messages WHERE position = 0")
    connection.close()

    async def restarted() -> None:
        async with live(tmp_path) as env:
            before = env.stored_row(sid)
            for call in (
                env.client.get_session(sid),
                env.client.stream_turn(sid, Submit(CANARY)),
                env.client.stream_turn(sid, Submit(CANARY)),
            ):
                error = await refused(call)
                assert_clean(error, grpc.StatusCode.FAILED_PRECONDITION, CORRUPT)
                assert error.metadata["code"] == "history_mismatch"
            assert env.stored_row(sid) == before

    run(restarted())
