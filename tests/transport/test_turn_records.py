"""Turn records through a live server: GetTurn, ListTurns, answer origins, repeated failures."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import string
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat.service import Limits
from agentskit_chat_client import (
    AnswerOrigin,
    ChatClient,
    Retry,
    Submit,
    TurnFailed,
    TurnResult,
)

from .conftest import CANARY, live, refused, run
from .test_errors import assert_clean
from .test_tenants import TOKEN_A, TOKEN_B, two_tenants
from .web.conftest import web_live
from .web.wire import reason, unary

NOT_FOUND = grpc.StatusCode.NOT_FOUND
INVALID = grpc.StatusCode.INVALID_ARGUMENT


def decision_of(result: TurnResult) -> tuple[Any, ...]:
    decision = result.decision
    assert decision is not None
    return (
        decision.kind,
        decision.route_id,
        decision.from_state,
        decision.to_state,
        decision.replayed,
    )


def kinds(result: TurnResult) -> list[str]:
    return [type(event).__name__ for event in result.events]


def test_a_repeated_model_failure_repeats_its_decision_and_failure(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            await env.client.run_turn(sid, Submit("/count"))  # idle -> busy
            first = await env.client.run_turn(sid, Submit("/fail-model"), turn_id="f1")
            assert kinds(first) == ["TurnStarted", "TurnDecision", "TextDelta", "TurnFailed"]
            assert decision_of(first) == ("agentic", None, "busy", "busy", False)
            assert first.failed is not None
            assert (first.failed.code, first.failed.retryable) == ("model_server_error", True)
            before = await env.stored(sid)
            again = await env.client.run_turn(sid, Submit("/fail-model"), turn_id="f1")
            # The whole outcome again, but not the deltas: their text was never committed.
            assert kinds(again) == ["TurnStarted", "TurnDecision", "TurnFailed"]
            assert again.started is not None
            assert again.started.duplicate
            assert decision_of(again) == decision_of(first)
            assert again.failed is not None
            assert (again.failed.code, again.failed.message, again.failed.retryable) == (
                first.failed.code,
                first.failed.message,
                first.failed.retryable,
            )
            assert again.text == ""
            assert len(env.probe.model_calls) == 1  # the repeat ran nothing
            assert await env.stored(sid) == before
            record = await env.client.get_turn(sid, "f1")
            assert record.outcome == "failed"
            assert record.failure is not None
            assert record.failure.code == "model_server_error"
            assert record.failure.message == first.failed.message
            assert record.failure.retryable
            assert (
                record.kind,
                record.route_id,
                record.from_state,
                record.to_state,
                record.replayed,
            ) == decision_of(first)
            assert record.assistant_message_id is None
            assert record.usage is None

    run(scenario())


def test_a_repeated_output_limit_failure_repeats_its_decision(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path, limits=Limits(max_output_bytes=64)) as env:
            sid = (await env.client.create_session("probe")).session_id
            first = await env.client.run_turn(sid, Submit("/fill 65"), turn_id="big")
            assert kinds(first) == ["TurnStarted", "TurnDecision", "TurnFailed"]
            assert first.failed is not None
            assert first.failed.code == "output_limit"
            again = await env.client.run_turn(sid, Submit("/fill 65"), turn_id="big")
            assert kinds(again) == ["TurnStarted", "TurnDecision", "TurnFailed"]
            assert again.started is not None
            assert again.started.duplicate
            assert (
                decision_of(again) == decision_of(first) == ("agentic", None, "idle", "idle", False)
            )
            repeated = again.failed
            assert repeated is not None
            assert repeated == dataclasses.replace(
                first.failed, sequence=repeated.sequence, time=repeated.time
            )
            record = (await env.client.list_turns(sid)).turns[0]
            assert (record.turn_id, record.kind, record.from_state) == ("big", "agentic", "idle")
            assert len(env.probe.model_calls) == 1

    run(scenario())


def test_a_repeated_route_failure_streams_no_decision_as_its_original(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            first = await env.client.run_turn(sid, Submit("/boom"), turn_id="b1")
            again = await env.client.run_turn(sid, Submit("/boom"), turn_id="b1")
            assert kinds(first) == kinds(again) == ["TurnStarted", "TurnFailed"]

    run(scenario())


def test_a_failed_route_names_itself_in_the_event_and_the_record(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            result = await env.client.run_turn(sid, Submit("/boom"), turn_id="b1")
            assert isinstance(result.events[-1], TurnFailed)
            assert result.failed is not None
            assert (result.failed.code, result.failed.route_id) == ("route_failed", "boom")
            again = await env.client.run_turn(sid, Submit("/boom"), turn_id="b1")
            assert again.failed is not None
            assert again.failed.route_id == "boom"
            record = await env.client.get_turn(sid, "b1")
            assert record.failure is not None
            assert (record.failure.code, record.failure.route_id) == ("route_failed", "boom")
            assert record.route_id == "boom"
            assert record.failure.retryable is False

    run(scenario())


def test_get_turn_reports_completed_turns_with_their_decision_and_times(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            before = datetime.now(UTC) - timedelta(seconds=1)
            done = await env.client.run_turn(sid, Submit("/start"), turn_id="t-start")
            chat = await env.client.run_turn(sid, Submit(f"hello {CANARY}"), turn_id="t-chat")
            replay = await env.client.run_turn(sid, Retry(), turn_id="t-retry")
            stored = await env.stored(sid)
            record = await env.client.get_turn(sid, "t-start")
            assert done.completed is not None
            assert done.started is not None
            assert record.turn_id == "t-start"
            assert (record.operation, record.outcome) == ("submit", "completed")
            assert (record.kind, record.route_id) == ("deterministic", "start")
            assert (record.from_state, record.to_state) == ("idle", "collecting")
            assert record.user_message_id == done.started.user_message_id
            assert record.assistant_message_id == done.completed.assistant_message_id
            assert record.failure is None
            assert record.usage is None
            assert not record.replayed
            assert record.start_time is not None
            assert record.end_time is not None
            assert before <= record.start_time <= record.end_time <= datetime.now(UTC)
            agentic = await env.client.get_turn(sid, "t-chat")
            assert (agentic.kind, agentic.route_id) == ("agentic", None)
            assert agentic.from_state == agentic.to_state == "collecting"
            assert chat.completed is not None
            assert agentic.assistant_message_id == chat.completed.assistant_message_id
            retried = await env.client.get_turn(sid, "t-retry")
            assert replay.decision is not None
            assert (retried.operation, retried.replayed) == ("retry", replay.decision.replayed)
            assert CANARY not in repr(agentic)
            assert await env.stored(sid) == stored  # reading runs and writes nothing

    run(scenario())


def test_get_turn_reports_usage_of_an_agentic_turn(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            await env.client.run_turn(sid, Submit("tell me"), turn_id="m1")
            record = await env.client.get_turn(sid, "m1")
            assert record.usage is not None
            assert (record.usage.input_tokens, record.usage.output_tokens) == (7, 2)
            repeated = await env.client.run_turn(sid, Submit("tell me"), turn_id="m1")
            assert repeated.completed is not None
            assert repeated.completed.usage == record.usage

    run(scenario())


def test_a_lost_stream_is_recovered_with_get_turn(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            turn = asyncio.create_task(env.client.run_turn(sid, Submit("/slow"), turn_id="slow"))
            await asyncio.wait_for(env.probe.entered.wait(), 60)
            running = await env.client.get_turn(sid, "slow")
            assert (running.outcome, running.operation) == ("running", "submit")
            assert running.user_message_id is not None
            assert running.start_time is not None
            assert running.end_time is None
            assert running.kind == "unspecified"
            assert running.assistant_message_id is None
            listed = await env.client.list_turns(sid)
            assert [t.turn_id for t in listed.turns] == ["slow"]
            env.probe.gate.set()
            result = await turn
            assert result.completed is not None
            finished = await env.client.get_turn(sid, "slow")
            assert finished.outcome == "completed"
            assert finished.assistant_message_id == result.completed.assistant_message_id
            assert finished.end_time is not None

    run(scenario())


def test_get_turn_refusals_are_specific_and_change_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            await env.client.run_turn(sid, Submit("/start"), turn_id="t1")
            before = await env.stored(sid)
            missing = await refused(env.client.get_turn(sid, "never-ran"))
            assert_clean(missing, NOT_FOUND, "ERROR_REASON_TURN_NOT_FOUND")
            bad = await refused(env.client.get_turn(sid, f"bad id {CANARY}"))
            assert_clean(bad, INVALID, "ERROR_REASON_INVALID_ARGUMENT")
            assert bad.metadata["field"] == "turn_id"
            nobody = await refused(env.client.get_turn("nobody", "t1"))
            assert_clean(nobody, NOT_FOUND, "ERROR_REASON_SESSION_NOT_FOUND")
            assert await env.stored(sid) == before

    run(scenario())


def test_list_turns_pages_newest_first(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            for index in range(5):
                await env.client.run_turn(sid, Submit("/count"), turn_id=f"t{index}")
            seen: list[list[str]] = []
            token: str | None = None
            while True:
                page = await env.client.list_turns(sid, page_size=2, page_token=token)
                seen.append([t.turn_id for t in page.turns])
                if page.next_page_token is None:
                    break
                token = page.next_page_token
                await env.client.run_turn(sid, Submit("/count"))  # newer turns join page one
            assert seen == [["t4", "t3"], ["t2", "t1"], ["t0"]]
            everything = await env.client.list_turns(sid)
            assert len(everything.turns) == 7
            assert everything.next_page_token is None
            assert [t.turn_id for t in everything.turns][2:] == ["t4", "t3", "t2", "t1", "t0"]
            streamed = [t.turn_id async for t in env.client.all_turns(sid)]
            assert streamed == [t.turn_id for t in everything.turns]

    run(scenario())


def test_list_turns_page_size_bounds(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            for index in range(23):
                await env.client.run_turn(sid, Submit("/count"), turn_id=f"t{index:02}")
            default = await env.client.list_turns(sid)
            assert len(default.turns) == 20
            assert default.next_page_token is not None
            rest = await env.client.list_turns(sid, page_token=default.next_page_token)
            assert [t.turn_id for t in rest.turns] == ["t02", "t01", "t00"]
            assert rest.next_page_token is None
            large = await env.client.list_turns(sid, page_size=10_000)
            assert len(large.turns) == 23
            assert large.next_page_token is None
            empty = await env.client.list_turns(
                (await env.client.create_session("probe")).session_id
            )
            assert empty.turns == ()
            assert empty.next_page_token is None

    run(scenario())


def _encoded(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _tampered(token: str) -> str:
    """`token` with one bit of its signed content flipped."""
    data = bytearray(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    data[5] ^= 0x01
    return _encoded(bytes(data))


FORGED = _encoded(json.dumps({"v": 1, "s": "s1", "t": "t1", "r": False}).encode())
"""A token as this server once issued them (plain JSON): anyone could write one."""
NESTED = _encoded(b"[" * 100_000)
"""Deeper than any recursion limit, for a decoder that would parse before it verifies."""
OVERSIZED = "A" * 1_000_000
TOKEN_REFUSED = "page_token is not a token this server issued for this session"


@pytest.mark.parametrize(
    "token", ["not-a-token", "e30", FORGED, NESTED, OVERSIZED, "A" * 67, "é" * 67, CANARY]
)
def test_list_turns_refuses_tokens_it_did_not_issue(tmp_path: Path, token: str) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe", session_id="s1")).session_id
            for index in range(3):
                await env.client.run_turn(sid, Submit("/count"), turn_id=f"t{index}")
            before = await env.stored(sid)
            error = await refused(env.client.list_turns(sid, page_token=token))
            assert_clean(error, INVALID, "ERROR_REASON_INVALID_ARGUMENT")
            assert error.metadata["field"] == "page_token"
            assert error.message == TOKEN_REFUSED
            assert await env.stored(sid) == before

    run(scenario())


def test_list_turns_tokens_are_signed_and_continue_only_their_own_session(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            first = (await env.client.create_session("probe")).session_id
            second = (await env.client.create_session("probe")).session_id
            for sid in (first, second):
                for index in range(3):
                    await env.client.run_turn(sid, Submit("/count"), turn_id=f"t{index}")
            page = await env.client.list_turns(first, page_size=1)
            token = page.next_page_token
            assert token is not None
            assert len(token) <= 100
            assert set(token) <= set(string.ascii_letters + string.digits + "-_")
            assert first not in token
            assert b"t2" not in base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            # The same turn ids, the same anchor: still another session's token.
            foreign = await refused(env.client.list_turns(second, page_token=token))
            assert_clean(foreign, INVALID, "ERROR_REASON_INVALID_ARGUMENT")
            assert foreign.metadata["field"] == "page_token"
            tampered = await refused(env.client.list_turns(first, page_token=_tampered(token)))
            assert_clean(tampered, INVALID, "ERROR_REASON_INVALID_ARGUMENT")
            assert tampered.metadata["field"] == "page_token"
            assert foreign.message == tampered.message == TOKEN_REFUSED
            # The genuine token continues where its page ended, on any connection.
            rest = await env.client.list_turns(first, page_size=5, page_token=token)
            assert [t.turn_id for t in rest.turns] == ["t1", "t0"]
            assert rest.next_page_token is None
            # The session deleted and created again under its id: a new session, new tokens.
            await env.client.delete_session(first)
            await env.client.create_session("probe", session_id=first)
            for index in range(3):
                await env.client.run_turn(first, Submit("/count"), turn_id=f"t{index}")
            reborn = await refused(env.client.list_turns(first, page_token=token))
            assert reborn.metadata["field"] == "page_token"
            negative = await refused(env.client.list_turns(first, page_size=-1))
            assert_clean(negative, INVALID, "ERROR_REASON_INVALID_ARGUMENT")
            assert negative.metadata["field"] == "page_size"
            nobody = await refused(env.client.list_turns("nobody"))
            assert_clean(nobody, NOT_FOUND, "ERROR_REASON_SESSION_NOT_FOUND")

    run(scenario())


def test_a_page_token_of_one_tenant_is_refused_on_anothers_session_of_that_id(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        authenticator = two_tenants(tmp_path)
        async with (
            live(tmp_path, authenticator=authenticator, token=TOKEN_A) as env,
            ChatClient(env.target, token=TOKEN_B) as b,
        ):
            for client in (env.client, b):  # the same session id and turn ids in both
                await client.create_session("probe", session_id="shared")
                for index in range(3):
                    await client.run_turn("shared", Submit("/count"), turn_id=f"t{index}")
            page = await env.client.list_turns("shared", page_size=1)
            assert page.next_page_token is not None
            before = env.dump()
            error = await refused(b.list_turns("shared", page_token=page.next_page_token))
            assert_clean(error, INVALID, "ERROR_REASON_INVALID_ARGUMENT")
            assert error.metadata["field"] == "page_token"
            assert error.message == TOKEN_REFUSED
            own = await b.list_turns("shared", page_size=1)
            assert own.next_page_token not in (None, page.next_page_token)
            rest = await b.list_turns("shared", page_token=own.next_page_token)
            assert [t.turn_id for t in rest.turns] == ["t1", "t0"]
            assert env.dump() == before

    run(scenario())


def test_connect_refuses_page_tokens_as_grpc_does(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            client = web.env.client
            sid = (await client.create_session("probe", session_id="s1")).session_id
            for index in range(3):
                await client.run_turn(sid, Submit("/count"), turn_id=f"t{index}")
            token = (await client.list_turns(sid, page_size=1)).next_page_token
            assert token is not None
            ok = await unary(
                web.http, "ListTurns", {"sessionId": sid, "pageSize": 5, "pageToken": token}
            )
            assert ok.status_code == 200
            assert [t["turnId"] for t in ok.json()["turns"]] == ["t1", "t0"]
            for bad in (_tampered(token), FORGED, NESTED, "A" * 100_000):
                response = await unary(web.http, "ListTurns", {"sessionId": sid, "pageToken": bad})
                assert response.status_code == 400
                error = response.json()
                assert error["code"] == "invalid_argument"
                assert error["message"] == TOKEN_REFUSED
                assert reason(error) == "ERROR_REASON_INVALID_ARGUMENT"

    run(scenario())


def test_reloaded_history_carries_the_origin_of_every_answer(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            await env.client.run_turn(sid, Submit("/start"), turn_id="t1")
            await env.client.run_turn(sid, Submit("hello"), turn_id="t2")
            await env.client.run_turn(sid, Submit("/name Ada"), turn_id="t3")
            await env.client.run_turn(sid, Retry(), turn_id="t4")
            history = await env.client.get_session(sid)
            assert [m.origin for m in history.messages if m.role == "user"] == [None] * 3
            assert [m.origin for m in history.messages if m.role == "assistant"] == [
                AnswerOrigin("deterministic", "start", "idle", "collecting", False, "t1"),
                AnswerOrigin("agentic", None, "collecting", "collecting", False, "t2"),
                AnswerOrigin("deterministic", "finish", "collecting", "complete", True, "t4"),
            ]
            kept = history.messages[1].id
            truncated = await env.client.truncate_history(sid, kept)
            assert [m.origin for m in truncated.messages] == [None, history.messages[1].origin]

    run(scenario())


def test_answers_of_turns_no_longer_retained_keep_their_decision(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("orders")).session_id
            await env.client.run_turn(sid, Submit("/retrun"))
            for _ in range(64):  # pushes the first turn out of the retained turns
                await env.client.run_turn(sid, Submit("/help"))
            history = await env.client.get_session(sid)
            first = history.messages[1].origin
            assert first == AnswerOrigin(
                "repaired", "begin-typo", "browsing", "identifying", False, None
            )
            assert history.messages[-1].origin is not None
            assert history.messages[-1].origin.turn_id is not None

    run(scenario())


def test_routes_expose_the_text_a_button_sends(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            support = await env.client.get_definition("support")
            assert {r.id: r.input_text for r in support.routes} == {"start": "/start", "finish": ""}
            orders = {
                r.id: (r.matcher, r.input_text)
                for r in (await env.client.get_definition("orders")).routes
            }
            assert orders["begin"] == ("command", "/return")
            assert orders["confirm"] == ("exact", "/confirm")
            assert orders["order"] == ("pattern", "")
            handler = {
                r.id: r.input_text for r in (await env.client.get_definition("probe")).routes
            }
            assert handler["count"] == "/count"

    run(scenario())


def test_health_lists_every_status_and_reflection_speaks_v1(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            channel = env.client.channel
            health_list: Any = channel.unary_unary(
                "/grpc.health.v1.Health/List",
                request_serializer=lambda message: message.SerializeToString(),
                response_deserializer=lambda data: data,
            )
            # The typing stubs of grpcio-health-checking predate List.
            messages: Any = health_pb2
            raw = await health_list(messages.HealthListRequest())
            statuses = messages.HealthListResponse.FromString(raw).statuses
            serving = health_pb2.HealthCheckResponse.SERVING
            assert {name: s.status for name, s in statuses.items()} == {
                "": serving,
                "agentskit.chat.v1.ChatService": serving,
            }
            info = channel.stream_stream(
                "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
            )
            requests = [
                reflection_pb2.ServerReflectionRequest(list_services=""),
                reflection_pb2.ServerReflectionRequest(
                    file_containing_symbol="grpc.reflection.v1.ServerReflection"
                ),
                reflection_pb2.ServerReflectionRequest(
                    file_containing_symbol="agentskit.chat.v1.ChatService"
                ),
            ]
            answers = [answer async for answer in info(iter(requests))]
            names = {s.name for s in answers[0].list_services_response.service}
            assert {
                "agentskit.chat.v1.ChatService",
                "grpc.health.v1.Health",
                "grpc.reflection.v1.ServerReflection",
                "grpc.reflection.v1alpha.ServerReflection",
            } <= names
            assert answers[1].file_descriptor_response.file_descriptor_proto
            assert answers[2].file_descriptor_response.file_descriptor_proto

    run(scenario())


def test_the_generated_stub_reaches_every_new_rpc(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            stub = chat_pb2_grpc.ChatServiceStub(env.client.channel)
            sid = (await env.client.create_session("support")).session_id
            reply = await stub.ListTurns(pb.ListTurnsRequest(session_id=sid))
            assert list(reply.turns) == []
            assert reply.next_page_token == ""

    run(scenario())
