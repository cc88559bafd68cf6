"""Optimistic concurrency: requests that name the cursor they expect change nothing when it
moved, and say what the cursor is now."""

from __future__ import annotations

from pathlib import Path

import grpc

from agentskit_chat_client import ChatError, Submit

from .conftest import live, refused, run
from .test_errors import assert_clean

ABORTED = grpc.StatusCode.ABORTED


def assert_conflict(error: ChatError, cursor: int) -> None:
    assert_clean(error, ABORTED, "ERROR_REASON_CONFLICT")
    assert error.metadata["cursor"] == str(cursor)


def test_a_turn_runs_only_at_the_expected_cursor(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            session = await env.client.create_session("support")
            sid = session.session_id
            first = await env.client.run_turn(
                sid, Submit("/start"), expected_cursor=session.cursor, turn_id="t1"
            )
            assert first.completed is not None
            cursor = first.completed.cursor
            before = await env.stored(sid)
            for stale in (session.cursor, cursor + 1, -1):
                error = await refused(
                    env.client.stream_turn(sid, Submit("/name Ada"), expected_cursor=stale)
                )
                assert_conflict(error, cursor)
            assert await env.stored(sid) == before
            repeated = await env.client.run_turn(  # a finished turn id repeats regardless
                sid, Submit("/start"), expected_cursor=session.cursor, turn_id="t1"
            )
            assert repeated.started is not None
            assert repeated.started.duplicate
            second = await env.client.run_turn(sid, Submit("/name Ada"), expected_cursor=cursor)
            assert second.completed is not None
            assert second.completed.snapshot.state == "complete"

    run(scenario())


def test_a_cached_record_never_lets_a_stale_cursor_through(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as first, live(tmp_path) as second:
            sid = (await first.client.create_session("support")).session_id
            started = await first.client.run_turn(sid, Submit("/start"))  # first caches it
            assert started.completed is not None
            stale = started.completed.cursor
            chat = await second.client.run_turn(sid, Submit("hello"))  # second moves it on
            assert chat.completed is not None
            before = await first.stored(sid)
            error = await refused(
                first.client.stream_turn(sid, Submit("/name Ada"), expected_cursor=stale)
            )
            assert_conflict(error, chat.completed.cursor)
            assert await first.stored(sid) == before

    run(scenario())


def test_truncation_happens_only_at_the_expected_cursor(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            result = await env.client.run_turn(sid, Submit("/start"))
            assert result.completed is not None
            cursor = result.completed.cursor
            before = await env.stored(sid)
            error = await refused(env.client.truncate_history(sid, expected_cursor=cursor - 1))
            assert_conflict(error, cursor)
            assert await env.stored(sid) == before
            truncated = await env.client.truncate_history(sid, expected_cursor=cursor)
            assert truncated.messages == ()
            assert truncated.session.cursor == cursor + 1

    run(scenario())


def test_deletion_happens_only_at_the_expected_cursor(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            result = await env.client.run_turn(sid, Submit("/start"))
            assert result.completed is not None
            cursor = result.completed.cursor
            before = await env.stored(sid)
            error = await refused(env.client.delete_session(sid, expected_cursor=cursor + 3))
            assert_conflict(error, cursor)
            assert await env.stored(sid) == before
            await env.client.delete_session(sid, expected_cursor=cursor)
            gone = await refused(env.client.get_session(sid))
            assert_clean(gone, grpc.StatusCode.NOT_FOUND, "ERROR_REASON_SESSION_NOT_FOUND")
            again = await refused(env.client.delete_session(sid, expected_cursor=cursor))
            assert_clean(again, grpc.StatusCode.NOT_FOUND, "ERROR_REASON_SESSION_NOT_FOUND")
            assert env.raw("SELECT count(*) FROM messages WHERE session_id = ?", sid) == [(0,)]

    run(scenario())
