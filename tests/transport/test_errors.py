"""Every refusal has a specific status and ErrorInfo reason, echoes nothing, changes nothing."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from datetime import timedelta
from pathlib import Path

import grpc
import pytest

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat.conversation import load_definitions
from agentskit_chat.service import Limits
from agentskit_chat_client import (
    ChatClient,
    ChatError,
    Dispatch,
    Edit,
    HistoryMode,
    Message,
    Retry,
    Submit,
)
from tests.waiting import EVENT_WAIT, longer_deadlines

from .conftest import CANARY, EXAMPLES, Live, live, once_released, refused, run

ABORTED = grpc.StatusCode.ABORTED


async def both_modes(client: ChatClient) -> tuple[str, str]:
    """A server-held and a client-held session of the support chat."""
    server_held = await client.create_session("support")
    client_held = await client.create_session("support", history_mode=HistoryMode.CLIENT)
    return server_held.session_id, client_held.session_id


def assert_clean(error: ChatError, code: grpc.StatusCode, reason: str) -> None:
    """The status and reason are as expected and nothing of the canary input is echoed."""
    assert error.code == code
    assert error.reason == reason
    assert error.domain == "chat.agentskit.dev"
    assert CANARY not in str(error)
    assert all(CANARY not in value for value in error.metadata.values())


@pytest.mark.parametrize(
    ("operation", "field"),
    [
        (Edit("no-such-message", CANARY), "edit.message_id"),
        (Retry("no-such-message"), "retry.message_id"),
        (Submit(CANARY, message_id="bad id with spaces"), "submit.message_id"),
    ],
)
def test_invalid_turn_arguments(tmp_path: Path, operation: object, field: str) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            await env.client.run_turn(sid, Submit("/start"))
            before = await env.stored(sid)
            error = await refused(env.client.stream_turn(sid, operation))  # type: ignore[arg-type]
            assert_clean(error, grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT")
            assert error.metadata["field"] == field
            assert await env.stored(sid) == before

    run(scenario())


def test_a_request_without_an_operation_or_turn_id_is_invalid(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            before = await env.stored(sid)
            stub = chat_pb2_grpc.ChatServiceStub(env.client.channel)
            for request, field in [
                (pb.StreamTurnRequest(session_id=sid, turn_id="t1"), "operation"),
                (
                    pb.StreamTurnRequest(session_id=sid, submit=pb.SubmitOperation(content="x")),
                    "turn_id",
                ),
                (
                    pb.StreamTurnRequest(
                        session_id=sid,
                        turn_id="t2",
                        dispatch=pb.DispatchOperation(messages=[pb.Message(id="u1", content="x")]),
                    ),
                    "dispatch.messages[0].role",
                ),
            ]:
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    async for _ in stub.StreamTurn(request):
                        pass
                assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert field in (caught.value.details() or "")
            error = await refused(env.client.stream_turn(sid, Submit("x"), turn_id="bad turn id"))
            assert error.metadata["field"] == "turn_id"
            assert await env.stored(sid) == before

    run(scenario())


def test_client_held_histories_with_repeated_ids_are_invalid(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (
                await env.client.create_session("support", history_mode=HistoryMode.CLIENT)
            ).session_id
            before = await env.stored(sid)
            twice = (Message("u1", "user", CANARY), Message("u1", "user", CANARY))
            error = await refused(env.client.stream_turn(sid, Dispatch(twice)))
            assert_clean(error, grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT")
            assert await env.stored(sid) == before

    run(scenario())


def test_unknown_sessions_and_definitions_are_not_found(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            for call in (
                env.client.get_session("nobody"),
                env.client.delete_session("nobody"),
                env.client.truncate_history("nobody"),
            ):
                assert_clean(
                    await refused(call), grpc.StatusCode.NOT_FOUND, "ERROR_REASON_SESSION_NOT_FOUND"
                )
            error = await refused(env.client.stream_turn("nobody", Submit(CANARY)))
            assert_clean(error, grpc.StatusCode.NOT_FOUND, "ERROR_REASON_SESSION_NOT_FOUND")
            for lookup in (env.client.get_definition("nope"), env.client.create_session("nope")):
                assert_clean(
                    await refused(lookup),
                    grpc.StatusCode.NOT_FOUND,
                    "ERROR_REASON_DEFINITION_NOT_FOUND",
                )
            assert env.raw("SELECT count(*) FROM sessions") == [(0,)]

    run(scenario())


def test_a_duplicate_session_id_already_exists_and_keeps_the_first(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            await env.client.create_session("support", session_id="s-1")
            await env.client.run_turn("s-1", Submit("/start"))
            before = await env.stored("s-1")
            error = await refused(env.client.create_session("orders", session_id="s-1"))
            assert_clean(error, grpc.StatusCode.ALREADY_EXISTS, "ERROR_REASON_SESSION_EXISTS")
            assert await env.stored("s-1") == before

    run(scenario())


def test_a_turn_while_another_holds_the_lease_is_aborted(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            running = asyncio.create_task(env.client.run_turn(sid, Submit("/wait"), turn_id="w1"))
            await asyncio.wait_for(env.probe.entered.wait(), 60)
            before = await env.stored(sid)
            busy = await refused(env.client.stream_turn(sid, Submit(CANARY)))
            assert_clean(busy, ABORTED, "ERROR_REASON_SESSION_BUSY")
            assert busy.retry_after_ms is not None
            assert busy.retry_after_ms > 0
            assert busy.retry_delay is not None  # google.rpc.RetryInfo beside the metadata
            assert busy.retry_delay == timedelta(milliseconds=int(busy.metadata["retry_after_ms"]))
            same = await refused(env.client.stream_turn(sid, Submit("/wait"), turn_id="w1"))
            assert_clean(same, ABORTED, "ERROR_REASON_TURN_IN_PROGRESS")
            assert same.retry_delay is not None
            assert same.retry_delay > timedelta(0)
            truncate = await refused(env.client.truncate_history(sid))
            assert_clean(truncate, ABORTED, "ERROR_REASON_SESSION_BUSY")
            assert await env.stored(sid) == before
            env.probe.gate.set()
            result = await running
            assert result.text == "waited"
            assert env.probe.route_calls == ["wait"]

    run(scenario())


def test_two_clients_racing_one_session_run_exactly_one_turn(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id

            async with ChatClient(env.target) as other:

                async def attempt(client: ChatClient) -> object:
                    try:
                        return await client.run_turn(sid, Submit("/wait"))
                    except ChatError as error:
                        return error

                racing = [
                    asyncio.create_task(attempt(env.client)),
                    asyncio.create_task(attempt(other)),
                ]
                await asyncio.wait_for(env.probe.entered.wait(), 60)
                _done, _ = await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
                env.probe.gate.set()
                outcomes = [await task for task in racing]
            errors = [o for o in outcomes if isinstance(o, ChatError)]
            assert len(errors) == 1
            assert errors[0].code == ABORTED
            assert errors[0].reason in {"ERROR_REASON_SESSION_BUSY", "ERROR_REASON_CONFLICT"}
            assert env.probe.route_calls == ["wait"]
            history = await env.client.get_session(sid)
            assert [m.role for m in history.messages] == ["user", "assistant"]

    run(scenario())


def test_a_stored_session_of_another_revision_fails_its_precondition(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            await env.client.run_turn(sid, Submit("/start"))
        revised = tmp_path / "revised"
        shutil.copytree(EXAMPLES, revised)
        support = revised / "support.yaml"
        support.write_text(support.read_text().replace("revision: 1", "revision: 2"))
        async with live(tmp_path, definitions=list(load_definitions(revised).values())) as env:
            before = await env.stored(sid)
            for call in (
                env.client.get_session(sid),
                env.client.truncate_history(sid),
            ):
                error = await refused(call)
                assert_clean(
                    error, grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_REVISION_MISMATCH"
                )
                assert error.metadata["definition_revision"] == "1"
            turn = await refused(env.client.stream_turn(sid, Submit(CANARY)))
            assert_clean(
                turn, grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_REVISION_MISMATCH"
            )
            assert await env.stored(sid) == before
            fresh = await env.client.create_session("support")
            assert fresh.definition_revision == 2

    run(scenario())


def test_a_corrupt_stored_record_fails_its_precondition_and_stays(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            await env.client.run_turn(sid, Submit("/start"))
        with sqlite3.connect(tmp_path / "sessions.db") as connection:
            connection.execute(
                "UPDATE sessions SET record = replace(record, 'collecting', 'complete')"
            )
        connection.close()
        async with live(tmp_path) as env:
            before = await env.stored(sid)
            for call in (
                env.client.stream_turn(sid, Submit(CANARY)),
                env.client.get_session(sid),
                env.client.stream_turn(sid, Submit(CANARY)),
            ):
                error = await refused(call)
                assert_clean(
                    error, grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_SESSION_CORRUPT"
                )
                assert error.metadata["code"] == "record_replay"
            assert await env.stored(sid) == before

    run(scenario())


def test_operations_must_fit_the_history_mode(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            server_held, client_held = await both_modes(env.client)
            before = (await env.stored(server_held), await env.stored(client_held))
            for call in (
                env.client.stream_turn(server_held, Dispatch((Message("u1", "user", CANARY),))),
                env.client.stream_turn(client_held, Submit(CANARY)),
                env.client.truncate_history(client_held),
            ):
                error = await refused(call)
                assert_clean(
                    error, grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_HISTORY_MISMATCH"
                )
            assert (await env.stored(server_held), await env.stored(client_held)) == before

    run(scenario())


def test_limits_are_resource_exhausted(tmp_path: Path) -> None:
    limits = Limits(max_input_bytes=64, max_history_messages=3)

    async def scenario() -> None:
        async with live(tmp_path, limits=limits, max_request_bytes=4096) as env:
            sid = (await env.client.create_session("support")).session_id
            await env.client.run_turn(sid, Submit("/start"))
            before = await env.stored(sid)
            too_big = await refused(env.client.stream_turn(sid, Submit(CANARY * 3)))
            assert_clean(too_big, grpc.StatusCode.RESOURCE_EXHAUSTED, "ERROR_REASON_LIMIT_EXCEEDED")
            assert too_big.metadata["limit"] == "input_bytes"
            too_long = await refused(env.client.stream_turn(sid, Submit("short")))
            assert_clean(
                too_long, grpc.StatusCode.RESOURCE_EXHAUSTED, "ERROR_REASON_LIMIT_EXCEEDED"
            )
            assert too_long.metadata["limit"] == "history_messages"
            oversized = await refused(env.client.stream_turn(sid, Submit("x" * 8000)))
            assert oversized.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert await env.stored(sid) == before

    run(scenario())


def test_the_turn_deadline_fails_the_turn_and_releases_the_lease(tmp_path: Path) -> None:
    async def attempt(folder: Path, timeout: float) -> bool:
        limits = Limits(turn_timeout=timeout, lease_ttl=max(30.0, 2 * timeout))
        async with live(folder, limits=limits) as env:
            sid = (await env.client.create_session("probe")).session_id
            result = await env.client.run_turn(sid, Submit("/slow"))
            assert result.failed is not None
            assert result.failed.code == "deadline_exceeded"
            assert result.failed.retryable
            if not env.probe.entered.is_set():
                return False  # the turn timed out before it reached the model: try longer
            await asyncio.wait_for(env.probe.model_closed.wait(), EVENT_WAIT)
            assert (await env.client.get_session(sid)).messages == ()
            assert (await env.client.run_turn(sid, Submit("/count"))).ok
            return True

    run(longer_deadlines(tmp_path, attempt))


def test_a_client_deadline_ends_the_call_with_deadline_exceeded(tmp_path: Path) -> None:
    async def attempt(folder: Path, deadline: float) -> bool:
        async with live(folder) as env:
            sid = (await env.client.create_session("probe")).session_id
            call = env.client.stream_turn(sid, Submit("/slow"), timeout=deadline)
            error = await refused(call)
            assert error.code == grpc.StatusCode.DEADLINE_EXCEEDED
            if not env.probe.entered.is_set():
                return False  # the deadline passed before the model was reached: try longer
            await asyncio.wait_for(env.probe.model_closed.wait(), EVENT_WAIT)
            assert (await env.client.get_session(sid)).messages == ()
            result = await once_released(env.client, sid, "/count")
            assert result.ok
            return True

    run(longer_deadlines(tmp_path, attempt))


def test_a_draining_server_refuses_new_turns_as_unavailable(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            before = await env.stored(sid)
            env.service.begin_drain()
            error = await refused(env.client.stream_turn(sid, Submit(CANARY)))
            assert_clean(error, grpc.StatusCode.UNAVAILABLE, "ERROR_REASON_SHUTTING_DOWN")
            assert await env.stored(sid) == before

    run(scenario())


def test_a_locked_store_is_unavailable_and_nothing_changes(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path, busy_timeout_ms=50) as env:
            sid = (await env.client.create_session("support")).session_id
            before = await env.stored(sid)
            blocker = sqlite3.connect(env.db_path, isolation_level=None)
            try:
                blocker.execute("BEGIN IMMEDIATE")
                error = await refused(env.client.stream_turn(sid, Submit(CANARY)))
                assert_clean(error, grpc.StatusCode.UNAVAILABLE, "ERROR_REASON_STORE_UNAVAILABLE")
            finally:
                blocker.execute("ROLLBACK")
                blocker.close()
            assert await env.stored(sid) == before
            assert (await env.client.run_turn(sid, Submit("/start"))).ok

    run(scenario())


def test_a_corrupt_stored_message_fails_its_precondition_without_quoting_it(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            await env.client.run_turn(sid, Submit(f"hello {CANARY}"))
        with sqlite3.connect(tmp_path / "sessions.db") as connection:
            connection.execute(
                "UPDATE messages SET content = CAST(? AS TEXT) WHERE position = 0",
                (CANARY.encode() + b"\xff",),
            )
        connection.close()
        async with live(tmp_path) as env:
            before = env.stored_row(sid)
            for call in (
                env.client.get_session(sid),
                env.client.stream_turn(sid, Submit("/start")),
            ):
                error = await refused(call)
                assert_clean(
                    error, grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_SESSION_CORRUPT"
                )
            assert env.stored_row(sid) == before

    run(scenario())


def test_a_server_held_history_has_a_size_limit(tmp_path: Path) -> None:
    limits = Limits(max_input_bytes=64, max_history_bytes=100)

    async def scenario() -> None:
        async with live(tmp_path, limits=limits) as env:
            sid = (await env.client.create_session("support")).session_id
            await env.client.run_turn(sid, Submit("/start"))  # 6 + 18 bytes
            await env.client.run_turn(sid, Submit("/name Ada"))  # 9 + 13 bytes
            before = await env.stored(sid)
            error = await refused(env.client.stream_turn(sid, Submit("y" * 60)))
            assert_clean(error, grpc.StatusCode.RESOURCE_EXHAUSTED, "ERROR_REASON_LIMIT_EXCEEDED")
            assert error.metadata["limit"] == "history_bytes"
            assert await env.stored(sid) == before

    run(scenario())


def test_a_turn_needs_text_and_a_user_message(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            server_held, client_held = await both_modes(env.client)
            before = (await env.stored(server_held), await env.stored(client_held))
            for call, field in (
                (env.client.stream_turn(server_held, Submit("")), "submit.content"),
                (
                    env.client.stream_turn(
                        client_held, Dispatch((Message("a1", "assistant", CANARY),))
                    ),
                    "dispatch.messages",
                ),
                (env.client.stream_turn(client_held, Dispatch(())), "dispatch.messages"),
            ):
                error = await refused(call)
                assert_clean(
                    error, grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT"
                )
                assert error.metadata["field"] == field
            assert (await env.stored(server_held), await env.stored(client_held)) == before

    run(scenario())


async def written_or_not(env: Live) -> None:
    """Once every statement the store's worker thread was given so far has run: a write
    queued behind the test's lock has landed by then, or it was never queued."""
    await asyncio.get_running_loop().run_in_executor(env.store._connections.executor, lambda: None)


def test_a_turn_cancelled_while_claiming_the_lease_releases_it(tmp_path: Path) -> None:
    """The client's deadline must pass while the claim waits on the lock: when it passed
    before the claim was queued (a busy machine), a longer deadline is tried."""

    async def attempt(folder: Path, deadline: float) -> bool:
        async with live(folder, busy_timeout_ms=600_000) as env:
            sid = (await env.client.create_session("support")).session_id
            blocker = sqlite3.connect(env.db_path, isolation_level=None, check_same_thread=False)
            try:
                blocker.execute("BEGIN IMMEDIATE")  # the claim waits on the worker thread
                # No route answers this text: the turn goes to the model, so it claims a lease.
                call = env.client.stream_turn(sid, Submit("hello"), timeout=deadline)
                error = await refused(call)
                assert error.code == grpc.StatusCode.DEADLINE_EXCEEDED
            finally:
                blocker.execute("ROLLBACK")
                blocker.close()
            await written_or_not(env)  # the claim lands once the lock is gone
            await asyncio.wait_for(env.service.turns.wait_idle(), EVENT_WAIT)  # then released
            stored = await env.store.load(sid)
            assert stored is not None
            if stored.cursor == 0:
                return False  # cancelled before its claim was queued
            assert stored.cursor == 2
            assert b'"lease":null' in stored.record
            result = await env.client.run_turn(sid, Submit("/start"))
            assert result.ok
            assert result.decision is not None
            assert result.decision.from_state == "idle"
            return True

    run(longer_deadlines(tmp_path, attempt))


def test_a_declared_answer_whose_client_gives_up_during_its_one_write_is_committed_once(
    tmp_path: Path,
) -> None:
    """A turn a declared route answers takes no lease: its only write is the commit. Once
    submitted it lands whole even when the client's deadline passes meanwhile, and the
    same turn id then gets the recorded outcome instead of running again."""

    async def attempt(folder: Path, deadline: float) -> bool:
        async with live(folder, busy_timeout_ms=600_000) as env:
            sid = (await env.client.create_session("support")).session_id
            blocker = sqlite3.connect(env.db_path, isolation_level=None, check_same_thread=False)
            try:
                blocker.execute("BEGIN IMMEDIATE")  # the write waits on the worker thread
                call = env.client.stream_turn(
                    sid, Submit("/start"), turn_id="t-1", timeout=deadline
                )
                error = await refused(call)
                assert error.code == grpc.StatusCode.DEADLINE_EXCEEDED
            finally:
                blocker.execute("ROLLBACK")
                blocker.close()
            await written_or_not(env)  # the write lands once the lock is gone
            stored = await env.store.load(sid)
            assert stored is not None
            if stored.cursor == 0:
                return False  # cancelled before its write was queued
            assert stored.cursor == 1  # one write, no lease to release
            assert b'"lease":null' in stored.record
            again = await env.client.run_turn(sid, Submit("/start"), turn_id="t-1")
            assert again.started is not None
            assert again.started.duplicate
            assert again.completed is not None
            assert again.completed.cursor == 1
            assert again.text == "What is your name?"
            return True

    run(longer_deadlines(tmp_path, attempt))


BLANK = " \t\n\u3000 "


@pytest.mark.parametrize(
    ("operation", "field"),
    [
        (Submit(BLANK), "submit.content"),
        (Submit(""), "submit.content"),
        (Edit("FIRST", BLANK), "edit.content"),
    ],
)
def test_input_that_is_only_whitespace_is_refused(
    tmp_path: Path, operation: object, field: str
) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            first = await env.client.run_turn(sid, Submit("/start"))
            assert first.started is not None
            turn = operation
            if isinstance(turn, Edit):
                turn = Edit(first.started.user_message_id or "", turn.content)
            before = await env.stored(sid)
            error = await refused(env.client.stream_turn(sid, turn))  # type: ignore[arg-type]
            assert_clean(error, grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT")
            assert error.metadata["field"] == field
            assert await env.stored(sid) == before

    run(scenario())


def test_a_dispatched_history_ending_in_a_blank_message_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (
                await env.client.create_session("support", history_mode=HistoryMode.CLIENT)
            ).session_id
            before = await env.stored(sid)
            history = (Message("u1", "user", "/start"), Message("u2", "user", BLANK))
            error = await refused(env.client.stream_turn(sid, Dispatch(history)))
            assert_clean(error, grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT")
            assert error.metadata["field"] == "dispatch.messages[1].content"
            assert await env.stored(sid) == before

    run(scenario())
