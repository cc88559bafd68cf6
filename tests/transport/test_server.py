"""Definitions, sessions, health and reflection of a live server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat.transport import SERVICE_NAME
from agentskit_chat_client import ChatError, Submit
from tests.waiting import until_async

from .conftest import health_status, live, run


def test_definitions_describe_states_and_routes_without_responses(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            listed = await env.client.list_definitions()
            assert [d.id for d in listed] == [
                "coffee",
                "orders",
                "probe",
                "probe-approve",
                "support",
            ]
            support = await env.client.get_definition("support")
            assert support.initial_state == "idle"
            assert [s.name for s in support.states] == ["idle", "collecting", "complete"]
            assert [(t.event, t.target) for t in support.states[0].transitions] == [
                ("start", "collecting")
            ]
            assert [(r.id, r.event, r.matcher) for r in support.routes] == [
                ("start", "start", "command"),
                ("finish", "finish", "pattern"),
            ]
            assert support.routes[1].states == ("collecting",)
            assert support.model_adapter == "offline"
            orders = await env.client.get_definition("orders")
            assert {r.kind for r in orders.routes} == {"deterministic", "repaired", "fallback"}
            stub = chat_pb2_grpc.ChatServiceStub(env.client.channel)
            raw = await stub.ListDefinitions(pb.ListDefinitionsRequest())
            wire = raw.SerializeToString()
            assert b"What is your name?" not in wire
            assert b"Welcome" not in wire

    run(scenario())


def test_sessions_are_created_read_and_deleted_with_their_history(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            session = await env.client.create_session("orders")
            assert session.session_id
            assert session.definition_id == "orders"
            assert session.definition_revision == 1
            assert session.snapshot.state == "browsing"
            assert session.snapshot.allowed_events == ("begin_return", "help")
            assert session.snapshot.actions == ("start_return", "show_help")
            chosen = await env.client.create_session("orders", session_id="my.session-1")
            assert chosen.session_id == "my.session-1"
            await env.client.run_turn("my.session-1", Submit("/retrun"))
            await env.client.delete_session("my.session-1")
            with pytest.raises(ChatError) as gone:
                await env.client.get_session("my.session-1")
            assert gone.value.code == grpc.StatusCode.NOT_FOUND
            assert env.raw("SELECT count(*) FROM messages") == [(0,)]
            assert (await env.client.get_session(session.session_id)).session == session

    run(scenario())


def test_health_serves_and_reflection_lists_the_services(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            for name in ("", SERVICE_NAME):
                status = await health_status(env.client.channel, name)
                assert status == health_pb2.HealthCheckResponse.SERVING
            reflect = reflection_pb2_grpc.ServerReflectionStub(env.client.channel)  # type: ignore[arg-type]
            names: set[str] = set()
            requests = iter([reflection_pb2.ServerReflectionRequest(list_services="")])
            async for answer in reflect.ServerReflectionInfo(requests):  # type: ignore[operator]
                names |= {s.name for s in answer.list_services_response.service}
            assert {SERVICE_NAME, "grpc.health.v1.Health"} <= names

    run(scenario())


def test_draining_reports_not_serving_and_lets_the_turn_in_flight_finish(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            turn = asyncio.create_task(env.client.run_turn(sid, Submit("/wait")))
            await asyncio.wait_for(env.probe.entered.wait(), 60)
            draining = asyncio.create_task(env.server.drain(30))

            async def not_serving() -> bool:
                status = await health_status(env.client.channel, SERVICE_NAME)
                return status == health_pb2.HealthCheckResponse.NOT_SERVING

            await until_async(not_serving, "NOT_SERVING")
            assert not draining.done()
            env.probe.gate.set()
            result = await turn
            assert result.text == "waited"
            await draining
            assert env.service.turns.in_flight == 0

    run(scenario())
