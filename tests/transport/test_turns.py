"""Every turn operation through a real server and client, with SQLite underneath."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import grpc
import pytest

from agentskit_chat.models import OFFLINE_REPLY
from agentskit_chat_client import (
    ChatError,
    Dispatch,
    Edit,
    HistoryMode,
    Message,
    Regenerate,
    Retry,
    Submit,
    TextDelta,
    TurnCompleted,
    TurnDecision,
    TurnFailed,
    TurnStarted,
)
from tests.waiting import EVENT_WAIT

from .conftest import CANARY, live, once_released, run


def test_submit_streams_started_decision_delta_completed_in_sequence(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            session = await env.client.create_session("support")
            events = [e async for e in env.client.submit(session.session_id, "/start")]
            assert [type(e) for e in events] == [
                TurnStarted,
                TurnDecision,
                TextDelta,
                TurnCompleted,
            ]
            assert [e.sequence for e in events] == [1, 2, 3, 4]
            assert all(e.session_id == session.session_id for e in events)
            assert len({e.turn_id for e in events}) == 1
            started, decision, delta, completed = events
            assert isinstance(started, TurnStarted)
            assert started.operation == "submit"
            assert started.assistant_message_id  # known before any text
            assert isinstance(decision, TurnDecision)
            assert (decision.kind, decision.route_id) == ("deterministic", "start")
            assert (decision.from_state, decision.to_state) == ("idle", "collecting")
            assert not decision.replayed
            assert isinstance(delta, TextDelta)
            assert delta.text == "What is your name?"
            assert isinstance(completed, TurnCompleted)
            assert completed.content == "What is your name?"
            assert completed.assistant_message_id == started.assistant_message_id
            assert completed.finish_reason is None  # no model was asked
            assert completed.snapshot.state == "collecting"
            assert completed.snapshot.allowed_events == ("finish",)
            assert completed.cursor == session.cursor + 1  # one write: a declared route answered
            stored = await env.client.get_session(session.session_id)
            assert [(m.id, m.role, m.content) for m in stored.messages] == [
                (started.user_message_id, "user", "/start"),
                (completed.assistant_message_id, "assistant", "What is your name?"),
            ]
            assert stored.session.cursor == completed.cursor

    run(scenario())


def test_pattern_route_fills_the_template_and_completes_the_chart(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            await env.client.run_turn(sid, Submit("/start"))
            result = await env.client.run_turn(sid, Submit("/name Ada Lovelace"))
            assert result.text == "Welcome, Ada Lovelace."
            assert result.decision is not None
            assert result.decision.route_id == "finish"
            assert result.completed is not None
            assert result.completed.snapshot.state == "complete"
            assert result.completed.snapshot.actions == ("restart",)

    run(scenario())


def test_a_miss_goes_to_the_offline_model_without_a_transition(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            result = await env.client.run_turn(sid, Submit("What can you do?"))
            assert result.decision is not None
            assert (result.decision.kind, result.decision.route_id) == ("agentic", None)
            assert result.decision.from_state == result.decision.to_state == "idle"
            assert result.text == OFFLINE_REPLY
            assert result.completed is not None
            assert result.completed.usage is None
            deltas = [e for e in result.events if isinstance(e, TextDelta)]
            assert len(deltas) == 2  # streamed, not sent whole

    run(scenario())


def test_agentic_turns_carry_model_usage_and_the_unchanged_history(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            await env.client.run_turn(sid, Submit("/count"))
            result = await env.client.run_turn(sid, Submit("hello model"))
            assert result.text == "model answer"
            assert result.completed is not None
            assert result.started is not None  # an agentic answer's id is known before its text
            assert result.started.assistant_message_id == result.completed.assistant_message_id
            assert result.completed.finish_reason == "stop"  # as the model said
            assert result.completed.usage is not None
            assert (result.completed.usage.input_tokens, result.completed.usage.output_tokens) == (
                7,
                2,
            )
            assert env.probe.model_calls == [3]  # user, assistant, user: the whole history

    run(scenario())


def test_retry_replays_the_recorded_decision_without_calling_code(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            first = await env.client.run_turn(sid, Submit("/count"))
            assert first.text == "counted 1"
            again = await env.client.run_turn(sid, Retry())
            assert again.decision is not None
            assert again.decision.replayed
            assert again.text == "counted 1"
            assert env.probe.route_calls == ["count"]
            assert again.completed is not None
            assert again.completed.snapshot.state == "busy"
            history = await env.client.get_session(sid)
            assert [m.role for m in history.messages] == ["user", "assistant"]
            assert history.messages[1].id == again.completed.assistant_message_id

    run(scenario())


def test_regenerate_replays_and_replaces_the_assistant_message(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            first = await env.client.run_turn(sid, Submit("/count"))
            assert first.completed is not None
            result = await env.client.run_turn(
                sid, Regenerate(first.completed.assistant_message_id)
            )
            assert result.decision is not None
            assert result.decision.replayed
            assert result.started is not None
            assert result.started.operation == "regenerate"
            assert env.probe.route_calls == ["count"]
            history = await env.client.get_session(sid)
            assert len(history.messages) == 2
            assert result.completed is not None
            assert history.messages[1].id == result.completed.assistant_message_id
            assert history.messages[1].id != first.completed.assistant_message_id

    run(scenario())


def test_edit_rebuilds_the_state_from_the_retained_history(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            first = await env.client.run_turn(sid, Submit("/start"))
            await env.client.run_turn(sid, Submit("/name Ada"))
            assert first.started is not None
            assert first.started.user_message_id is not None
            edited = await env.client.run_turn(
                sid, Edit(first.started.user_message_id, "hello there")
            )
            assert edited.decision is not None
            assert edited.decision.kind == "agentic"
            assert edited.decision.from_state == "idle"
            history = await env.client.get_session(sid)
            assert history.session.snapshot.state == "idle"
            assert next((m.id, m.content) for m in history.messages) == (
                first.started.user_message_id,
                "hello there",
            )
            assert len(history.messages) == 2

    run(scenario())


def test_truncate_changes_no_state_until_the_next_turn_reconciles(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            await env.client.run_turn(sid, Submit("/start"))
            truncated = await env.client.truncate_history(sid)
            assert truncated.messages == ()
            assert truncated.session.snapshot.state == "collecting"  # no transition
            after = await env.client.get_session(sid)
            assert after.session.snapshot.state == "collecting"
            assert after.messages == ()
            result = await env.client.run_turn(sid, Submit("/start"))
            assert result.decision is not None
            assert (result.decision.from_state, result.decision.to_state) == (
                "idle",
                "collecting",
            )

    run(scenario())


def test_truncate_keeps_messages_through_the_named_one(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            first = await env.client.run_turn(sid, Submit("/start"))
            await env.client.run_turn(sid, Submit("/name Ada"))
            assert first.completed is not None
            kept = await env.client.truncate_history(sid, first.completed.assistant_message_id)
            assert [m.content for m in kept.messages] == ["/start", "What is your name?"]
            assert kept.session.snapshot.state == "complete"
            retried = await env.client.run_turn(sid, Retry())
            assert retried.decision is not None
            assert retried.decision.replayed
            assert retried.completed is not None
            assert retried.completed.snapshot.state == "collecting"

    run(scenario())


def test_client_held_dispatch_stores_no_content(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            session = await env.client.create_session(
                "support", session_id="client-held-1", history_mode=HistoryMode.CLIENT
            )
            assert session.history_mode == HistoryMode.CLIENT
            history = [Message("u1", "user", "/start")]
            first = await env.client.run_turn(session.session_id, Dispatch(tuple(history)))
            assert first.text == "What is your name?"
            assert first.started is not None
            assert first.started.user_message_id == "u1"
            history += [
                Message("a1", "assistant", first.text),
                Message("u2", "user", f"/name {CANARY}"),
            ]
            second = await env.client.run_turn(session.session_id, Dispatch(tuple(history)))
            assert second.text == f"Welcome, {CANARY}."
            retry = await env.client.run_turn(session.session_id, Dispatch(tuple(history)))
            assert retry.decision is not None
            assert retry.decision.replayed
            assert retry.text == f"Welcome, {CANARY}."
            stored = await env.client.get_session(session.session_id)
            assert stored.messages == ()
            assert stored.session.snapshot.state == "complete"
            assert env.raw("SELECT count(*) FROM messages") == [(0,)]
            dump = b"".join(row[0] for row in env.raw("SELECT record FROM sessions"))
            assert CANARY.encode() not in dump
            assert b"/start" not in dump

    run(scenario())


def test_a_repeated_turn_id_returns_the_recorded_outcome_without_running(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            first = await env.client.run_turn(sid, Submit("/count"), turn_id="turn-1")
            before = await env.stored(sid)
            again = await env.client.run_turn(sid, Submit("/count"), turn_id="turn-1")
            assert env.probe.route_calls == ["count"]
            assert again.started is not None
            assert again.started.duplicate
            assert again.text == first.text == "counted 1"
            assert again.decision is not None
            assert first.decision is not None
            assert again.decision.route_id == first.decision.route_id
            assert (again.decision.from_state, again.decision.to_state) == ("idle", "busy")
            assert again.completed is not None
            assert first.completed is not None
            assert again.completed.assistant_message_id == first.completed.assistant_message_id
            assert again.started.assistant_message_id == first.completed.assistant_message_id
            assert await env.stored(sid) == before

    run(scenario())


def test_a_repeated_failed_turn_id_repeats_the_failure(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            first = await env.client.run_turn(sid, Submit("/boom"), turn_id="boom-1")
            again = await env.client.run_turn(sid, Submit("/boom"), turn_id="boom-1")
            assert first.failed is not None
            assert again.failed is not None
            assert again.failed.code == first.failed.code == "route_failed"
            assert env.probe.route_calls == ["boom"]

    run(scenario())


def test_a_failing_route_commits_nothing_calls_no_model_and_leaks_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            before = await env.client.get_session(sid)
            result = await env.client.run_turn(sid, Submit("/boom"))  # raises with the canary
            assert result.failed is not None
            assert (result.failed.code, result.failed.message) == (
                "route_failed",
                "Deterministic route failed.",
            )
            assert result.completed is None
            assert result.decision is None
            after = await env.client.get_session(sid)
            assert after.messages == before.messages == ()
            assert after.session.snapshot == before.session.snapshot
            assert env.probe.model_calls == []
            assert CANARY not in str(result.events)
            assert (await env.client.run_turn(sid, Submit("/count"))).ok  # lease released

    run(scenario())
    assert CANARY not in caplog.text


def test_cancelling_the_stream_stops_the_model_and_releases_the_lease(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            stream = env.client.submit(sid, "/slow")
            async for event in stream:
                if isinstance(event, TextDelta):
                    break  # the client goes away mid-answer
            await stream.aclose()
            await asyncio.wait_for(env.probe.model_closed.wait(), 60)
            assert not env.probe.gate.is_set()
            env.probe.gate.set()
            history = await env.client.get_session(sid)
            assert history.messages == ()
            result = await once_released(env.client, sid, "/count")
            assert result.ok

    run(scenario())


def test_the_same_session_id_created_again_is_another_session(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            await env.client.create_session("probe", session_id="reused")
            old = asyncio.create_task(env.client.run_turn("reused", Submit("/wait")))
            await asyncio.wait_for(env.probe.entered.wait(), 60)
            await env.client.delete_session("reused")
            await env.client.create_session("probe", session_id="reused")
            truncated = await env.client.truncate_history("reused")  # a write: cursor 0 -> 1
            assert truncated.session.cursor == 1  # the cursor the old turn's commit expects
            env.probe.gate.set()
            stale = await old
            assert stale.failed is not None
            assert stale.failed.code == "conflict"
            history = await env.client.get_session("reused")
            assert history.messages == ()
            assert history.session.snapshot.state == "idle"
            assert history.session.cursor == 1
            assert (await env.client.run_turn("reused", Submit("/count"))).ok

    run(scenario())


def test_a_client_deadline_does_not_use_up_the_turn_id(tmp_path: Path) -> None:
    """The model waits on the gate until the server has ended the first call, so that call
    can only end by the server seeing the client's deadline, never by finishing first. The
    server sees it on its own time, a moment after the client gave up: the turn's events
    (WatchTurn) end with the `cancelled` failure once it did, its lease released before.
    Only then is the gate opened and the same turn id sent again: it runs the turn afresh."""

    async def attempt(folder: Path, deadline: float) -> bool:
        async with live(folder) as env:
            sid = (await env.client.create_session("probe")).session_id
            stream = env.client.stream_turn(
                sid, Submit("/slow"), turn_id="slow-1", timeout=deadline
            )
            with pytest.raises(ChatError) as ended:
                async for _ in stream:
                    pass
            assert ended.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
            if not env.probe.entered.is_set():
                return False  # the deadline passed before the model was reached: try longer
            watched = [
                event async for event in env.client.watch_turn(sid, "slow-1", timeout=EVENT_WAIT)
            ]
            last = watched[-1]
            assert isinstance(last, TurnFailed)
            assert last.code == "cancelled"
            assert env.probe.model_closed.is_set()  # the model saw the cancellation too
            env.probe.gate.set()
            result = await env.client.run_turn(
                sid, Submit("/slow"), turn_id="slow-1", timeout=EVENT_WAIT
            )
            assert result.started is not None
            assert not result.started.duplicate
            assert result.ok
            assert env.probe.model_calls == [1, 1]
            return True

    async def scenario() -> None:
        deadline = 0.3
        for round_ in range(8):  # a busy machine may need a longer deadline to reach the model
            if await attempt(tmp_path / str(round_), deadline):
                return
            deadline *= 2
        raise AssertionError("the model was never reached before the deadline")

    run(scenario())


def test_a_replica_never_acts_on_what_it_cached_once_another_one_wrote(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as first, live(tmp_path) as second:
            sid = (await first.client.create_session("support")).session_id
            await first.client.run_turn(sid, Submit("/start"))  # the first replica caches it
            named = await second.client.run_turn(sid, Submit("/name Ada"))
            assert named.text == "Welcome, Ada."
            again = await first.client.run_turn(sid, Retry())
            assert again.decision is not None
            assert again.decision.route_id == "finish"
            assert again.decision.replayed
            assert again.text == "Welcome, Ada."
            history = await second.client.get_session(sid)
            assert [m.content for m in history.messages] == [
                "/start",
                "What is your name?",
                "/name Ada",
                "Welcome, Ada.",
            ]
            assert history.session.snapshot.state == "complete"

    run(scenario())
