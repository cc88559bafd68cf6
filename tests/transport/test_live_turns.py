"""Turns that outlive their stream, followed with WatchTurn and stopped with CancelTurn,
through a real server on loopback (one process: the log of the turn is in memory)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat.service._event_log import EventLogs
from agentskit_chat.service._watchers import Watchers
from agentskit_chat.transport import Authenticator, token_digest
from agentskit_chat_client import ChatError
from agentskit_chat_client._errors import from_rpc_error
from tests.waiting import EVENT_WAIT, until

from .conftest import Live, live, run

TOKEN_A = "tenant-a-token-1111111111"
TOKEN_B = "tenant-b-token-2222222222"


def stub(env: Live, token: str | None = None) -> tuple[Any, Any]:
    metadata = () if token is None else (("authorization", f"Bearer {token}"),)
    return chat_pb2_grpc.ChatServiceStub(env.client.channel), metadata


async def session(env: Live, metadata: Any = ()) -> str:
    chat, _ = stub(env)
    created = await chat.CreateSession(
        pb.CreateSessionRequest(definition_id="probe"), metadata=metadata
    )
    return str(created.session.session_id)


def turn(session_id: str, turn_id: str, text: str, *, keep: bool) -> pb.StreamTurnRequest:
    mode = pb.DISCONNECT_MODE_CONTINUE if keep else pb.DISCONNECT_MODE_UNSPECIFIED
    return pb.StreamTurnRequest(
        session_id=session_id,
        turn_id=turn_id,
        submit=pb.SubmitOperation(content=text),
        on_disconnect=mode,
    )


async def collect(stream: AsyncIterator[pb.StreamTurnResponse]) -> list[pb.StreamTurnResponse]:
    return [event async for event in stream]


async def collect_after(
    first: pb.StreamTurnResponse, stream: AsyncIterator[pb.StreamTurnResponse]
) -> list[pb.StreamTurnResponse]:
    """`first`, read already, and the rest of `stream`."""
    return [first, *[event async for event in stream]]


async def error_of(call: Any) -> ChatError:
    try:
        if hasattr(call, "__aiter__"):
            async for _ in call:
                pass
        else:
            await call
    except grpc.aio.AioRpcError as error:
        return from_rpc_error(error)
    raise AssertionError("the call succeeded")


async def until_outcome(env: Live, session_id: str, turn_id: str, outcome: int) -> pb.TurnRecord:
    chat, _ = stub(env)
    give_up = time.monotonic() + EVENT_WAIT
    while True:
        found = await chat.GetTurn(pb.GetTurnRequest(session_id=session_id, turn_id=turn_id))
        record: pb.TurnRecord = found.turn
        if record.outcome == outcome:
            return record
        assert time.monotonic() < give_up, "the turn never reached the outcome"
        await asyncio.sleep(0.01)


async def cut_after_first_delta(env: Live, request: pb.StreamTurnRequest) -> list[Any]:
    """Start the turn, read up to its first delta, then cut the call (the client goes)."""
    chat, _ = stub(env)
    call = chat.StreamTurn(request)
    seen = []
    async for event in call:
        seen.append(event)
        if event.WhichOneof("event") == "delta":
            break
    call.cancel()
    return seen


def test_a_continued_turn_survives_its_client_and_commits_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            chat, _ = stub(env)
            sid = await session(env)
            seen = await cut_after_first_delta(env, turn(sid, "t-keep", "/slow", keep=True))
            await env.probe.entered.wait()
            running = await chat.GetTurn(pb.GetTurnRequest(session_id=sid, turn_id="t-keep"))
            assert running.turn.outcome == pb.TURN_OUTCOME_RUNNING
            env.probe.gate.set()  # the model goes on although nobody reads
            done = await until_outcome(env, sid, "t-keep", pb.TURN_OUTCOME_COMPLETED)
            assert done.assistant_message_id
            history = await chat.GetSession(pb.GetSessionRequest(session_id=sid))
            answers = [m.content for m in history.messages if m.role == pb.ROLE_ASSISTANT]
            assert answers == ["model answer"]
            # The reattach gets what the cut stream missed, numbered as the turn numbered it.
            rest = await collect(
                chat.WatchTurn(
                    pb.WatchTurnRequest(
                        session_id=sid, turn_id="t-keep", after_sequence=seen[-1].sequence
                    )
                )
            )
            sequences = [e.sequence for e in seen + rest]
            assert sequences == list(range(1, len(sequences) + 1))
            text = "".join(e.delta.text for e in seen + rest if e.WhichOneof("event") == "delta")
            assert text == "model answer"
            assert rest[-1].completed.assistant_message_id == done.assistant_message_id

    run(scenario())


def test_a_cancelling_turn_still_ends_with_its_stream(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            chat, _ = stub(env)
            sid = await session(env)
            await cut_after_first_delta(env, turn(sid, "t-cut", "/slow", keep=False))
            await env.probe.model_closed.wait()  # the model stream was closed
            # The server ends the turn on its own time once it saw the cut: its lease is
            # released before the turn is over.
            await asyncio.wait_for(env.service.turns.wait_idle(), EVENT_WAIT)
            error = await error_of(chat.GetTurn(pb.GetTurnRequest(session_id=sid, turn_id="t-cut")))
            assert error.reason == "ERROR_REASON_TURN_NOT_FOUND"

    run(scenario())


def test_watchers_reattach_after_cuts_and_get_every_event_once_in_order(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            chat, _ = stub(env)
            sid = await session(env)
            seen = await cut_after_first_delta(env, turn(sid, "t-w", "/slow", keep=True))
            await env.probe.entered.wait()
            # A watcher from the start and one after the first delta, both live: the first
            # has its first event, the second its headers, before the model goes on.
            from_start = chat.WatchTurn(pb.WatchTurnRequest(session_id=sid, turn_id="t-w"))
            first = await asyncio.wait_for(anext(aiter(from_start)), EVENT_WAIT)
            whole = asyncio.ensure_future(collect_after(first, from_start))
            after_delta = chat.WatchTurn(
                pb.WatchTurnRequest(session_id=sid, turn_id="t-w", after_sequence=seen[-1].sequence)
            )
            await asyncio.wait_for(after_delta.initial_metadata(), EVENT_WAIT)
            later = asyncio.ensure_future(collect(after_delta))
            assert not whole.done()  # live: waits for the turn
            env.probe.gate.set()
            everything, rest = await whole, await later
            assert [e.sequence for e in everything] == list(range(1, len(everything) + 1))
            assert [e.SerializeToString() for e in everything[: len(seen)]] != []
            assert [e.sequence for e in rest] == [e.sequence for e in everything[len(seen) :]]
            assert everything[-1].WhichOneof("event") == "completed"
            kinds = [e.WhichOneof("event") for e in everything]
            assert kinds.count("delta") == 2
            # The last sequence ends at once; past it is refused, and nothing changed.
            last = everything[-1].sequence
            assert (
                await collect(
                    chat.WatchTurn(
                        pb.WatchTurnRequest(session_id=sid, turn_id="t-w", after_sequence=last)
                    )
                )
                == []
            )
            past = await error_of(
                chat.WatchTurn(
                    pb.WatchTurnRequest(session_id=sid, turn_id="t-w", after_sequence=last + 1)
                )
            )
            assert past.code == grpc.StatusCode.INVALID_ARGUMENT
            assert past.metadata["field"] == "after_sequence"

    run(scenario())


def test_a_quiet_watch_sends_its_response_headers_before_any_event(tmp_path: Path) -> None:
    """A proxy waits for the headers only so long: a reattach to a turn whose model pauses
    must not hold them until the turn's next event."""

    async def scenario() -> None:
        async with live(tmp_path) as env:
            chat, _ = stub(env)
            sid = await session(env)
            seen = await cut_after_first_delta(env, turn(sid, "t-quiet", "/slow", keep=True))
            await env.probe.entered.wait()
            call = chat.WatchTurn(
                pb.WatchTurnRequest(
                    session_id=sid, turn_id="t-quiet", after_sequence=seen[-1].sequence
                )
            )
            await asyncio.wait_for(call.initial_metadata(), EVENT_WAIT)  # the model waits
            env.probe.gate.set()
            rest = await collect(call)
            assert rest[0].sequence == seen[-1].sequence + 1
            assert rest[-1].WhichOneof("event") == "completed"

    run(scenario())


def test_a_finished_turn_past_its_retention_answers_with_its_recorded_outcome(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            chat, _ = stub(env)
            sid = await session(env)
            first = await collect(chat.StreamTurn(turn(sid, "t-old", "hello", keep=True)))
            # Kept a while (here; a stream cut before the end leaves them in the store too).
            kept = await collect(
                chat.WatchTurn(pb.WatchTurnRequest(session_id=sid, turn_id="t-old"))
            )
            assert [e.sequence for e in kept] == [e.sequence for e in first]
            assert [e.WhichOneof("event") for e in kept] == [e.WhichOneof("event") for e in first]
            env.service.live.logs = EventLogs(retention=0.0)  # the retention is over
            await env.store.expire(int(time.time() * 1000) + 3_600_000)
            again = await collect(
                chat.WatchTurn(
                    pb.WatchTurnRequest(session_id=sid, turn_id="t-old", after_sequence=2)
                )
            )
            assert [e.sequence for e in again] == list(range(3, 3 + len(again)))
            assert again[0].started.duplicate
            assert again[-1].completed.content == first[-1].completed.content
            assert (
                again[-1].completed.assistant_message_id == first[-1].completed.assistant_message_id
            )

    run(scenario())


def test_an_unknown_turn_is_not_found_and_watching_changes_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            chat, _ = stub(env)
            sid = await session(env)
            before = env.dump()
            unknown = await error_of(
                chat.WatchTurn(pb.WatchTurnRequest(session_id=sid, turn_id="t-none"))
            )
            assert unknown.code == grpc.StatusCode.NOT_FOUND
            assert unknown.reason == "ERROR_REASON_TURN_NOT_FOUND"
            cancel = await chat.CancelTurn(pb.CancelTurnRequest(session_id=sid, turn_id="t-none"))
            assert cancel == pb.CancelTurnResponse()
            bad = await error_of(chat.WatchTurn(pb.WatchTurnRequest(session_id=sid, turn_id="")))
            assert bad.code == grpc.StatusCode.INVALID_ARGUMENT
            assert env.dump() == before

    run(scenario())


def test_an_unknown_disconnect_mode_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            chat, _ = stub(env)
            sid = await session(env)
            before = env.dump()
            request = turn(sid, "t-mode", "/start", keep=False)
            request.on_disconnect = 7  # type: ignore[assignment]  # a value no server knows
            refused = await error_of(chat.StreamTurn(request))
            assert refused.code == grpc.StatusCode.INVALID_ARGUMENT
            assert refused.metadata["field"] == "on_disconnect"
            assert env.dump() == before

    run(scenario())


@pytest.mark.parametrize("keep", [False, True])
def test_cancel_turn_stops_a_running_turn_and_its_streams_end_cancelled(
    tmp_path: Path, keep: bool
) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            chat, _ = stub(env)
            sid = await session(env)
            starter = asyncio.ensure_future(
                collect(chat.StreamTurn(turn(sid, "t-c", "/slow", keep=keep)))
            )
            await env.probe.entered.wait()
            watch = chat.WatchTurn(pb.WatchTurnRequest(session_id=sid, turn_id="t-c"))
            first = await asyncio.wait_for(anext(aiter(watch)), EVENT_WAIT)  # it follows
            watcher = asyncio.ensure_future(collect_after(first, watch))
            stopped = await chat.CancelTurn(pb.CancelTurnRequest(session_id=sid, turn_id="t-c"))
            assert stopped.cancelled
            assert env.probe.model_closed.is_set()  # the model stream closed before it returned
            for events in (await starter, await watcher):
                assert events[-1].failed.code == "cancelled"
                assert events[-1].failed.retryable
                assert [e.sequence for e in events] == list(range(1, len(events) + 1))
            # The lease is free at once; nothing was committed; a second cancel is a no-op.
            history = await chat.GetSession(pb.GetSessionRequest(session_id=sid))
            assert [m.role for m in history.messages] == []
            again = await chat.CancelTurn(pb.CancelTurnRequest(session_id=sid, turn_id="t-c"))
            assert again == pb.CancelTurnResponse()
            # The id runs again, and then a cancel reports the finished turn.
            env.probe.gate.set()
            rerun = await collect(chat.StreamTurn(turn(sid, "t-c", "/slow", keep=keep)))
            assert rerun[-1].WhichOneof("event") == "completed"
            assert not rerun[0].started.duplicate
            late = await chat.CancelTurn(pb.CancelTurnRequest(session_id=sid, turn_id="t-c"))
            assert not late.cancelled
            assert late.turn.outcome == pb.TURN_OUTCOME_COMPLETED
            watched = await collect(
                chat.WatchTurn(pb.WatchTurnRequest(session_id=sid, turn_id="t-c"))
            )
            assert [e.SerializeToString() for e in watched] != []
            assert [e.sequence for e in watched] == [e.sequence for e in rerun]
            assert (
                watched[-1].completed.assistant_message_id
                == rerun[-1].completed.assistant_message_id
            )

    run(scenario())


def two_tenants(tmp_path: Path) -> Authenticator:
    path = tmp_path / "tokens.yaml"
    path.write_text(
        "tokens:\n"
        f"  - {{sha256: {token_digest(TOKEN_A)}, tenant: a}}\n"
        f"  - {{sha256: {token_digest(TOKEN_B)}, tenant: b}}\n",
        encoding="utf-8",
    )
    return Authenticator(path)


def test_another_tenants_turn_is_a_missing_session(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path, authenticator=two_tenants(tmp_path), token=TOKEN_A) as env:
            chat, a = stub(env, TOKEN_A)
            _, b = stub(env, TOKEN_B)
            sid = await session(env, a)
            await collect(chat.StreamTurn(turn(sid, "t-a", "hello", keep=True), metadata=a))
            before = env.dump()
            calls: list[Callable[[str], Any]] = [
                lambda s: chat.WatchTurn(
                    pb.WatchTurnRequest(session_id=s, turn_id="t-a"), metadata=b
                ),
                lambda s: chat.CancelTurn(
                    pb.CancelTurnRequest(session_id=s, turn_id="t-a"), metadata=b
                ),
            ]
            for call in calls:
                other, missing = await error_of(call(sid)), await error_of(call("nobody"))
                assert other.code == grpc.StatusCode.NOT_FOUND
                assert other.reason == "ERROR_REASON_SESSION_NOT_FOUND"
                assert (other.message, dict(other.metadata)) == (
                    missing.message,
                    dict(missing.metadata),
                )
            assert env.dump() == before

    run(scenario())


def test_a_drain_waits_for_continued_turns_within_its_grace(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = await session(env)
            await cut_after_first_delta(env, turn(sid, "t-d", "/slow", keep=True))
            await env.probe.entered.wait()
            draining = asyncio.ensure_future(env.server.drain(10.0))
            await until(lambda: env.service.turns.draining, "the drain")
            assert not draining.done()  # the continued turn holds the drain
            env.probe.gate.set()
            await draining
            assert env.raw("SELECT cursor FROM sessions WHERE session_id = ?", sid) == [(2,)]
            contents = env.raw("SELECT content FROM messages WHERE session_id = ?", sid)
            assert contents[-1] == ("model answer",)  # claimed, then committed

    run(scenario())


def test_a_continued_turn_past_the_grace_ends_interrupted_and_frees_its_lease(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = await session(env)
            await cut_after_first_delta(env, turn(sid, "t-g", "/slow", keep=True))
            await env.probe.entered.wait()
            log = env.service.live.logs.find(("", sid, "t-g"))
            assert log is not None
            await env.server.drain(0.2)
            assert env.probe.model_closed.is_set()
            assert log.between(log.last - 1, log.last)[0].code == "interrupted"  # type: ignore[union-attr]
            assert env.raw("SELECT cursor FROM sessions WHERE session_id = ?", sid) == [(2,)]
            assert env.raw("SELECT content FROM messages WHERE session_id = ?", sid) == []

    run(scenario())


def test_watchers_past_the_bound_are_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            env.service.watchers = Watchers(per_session=1, per_tenant=2)
            chat, _ = stub(env)
            sid, other = await session(env), await session(env)
            await cut_after_first_delta(env, turn(sid, "t-1", "/slow", keep=True))
            request = pb.WatchTurnRequest(session_id=sid, turn_id="t-1")
            first = chat.WatchTurn(request)
            await first.initial_metadata()
            assert (await anext(aiter(first))).sequence == 1
            refused = await error_of(chat.WatchTurn(request))
            assert refused.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert refused.reason == "ERROR_REASON_LIMIT_EXCEEDED"
            assert refused.metadata["limit"] == "watchers_per_session"
            unknown = await error_of(
                chat.WatchTurn(pb.WatchTurnRequest(session_id=other, turn_id="t-x"))
            )
            assert unknown.reason == "ERROR_REASON_TURN_NOT_FOUND"  # counted, then let go
            first.cancel()  # a watcher that goes frees its place, once the server saw it go
            give_up = time.monotonic() + EVENT_WAIT
            while True:
                second = chat.WatchTurn(request)
                try:
                    assert (await anext(aiter(second))).sequence == 1
                    break
                except grpc.aio.AioRpcError as error:
                    if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                        raise
                    assert time.monotonic() < give_up, "the watcher's place was never freed"
                    await asyncio.sleep(0.02)
            env.probe.gate.set()
            events = [e async for e in second]
            assert events[-1].WhichOneof("event") == "completed"

    run(scenario())
