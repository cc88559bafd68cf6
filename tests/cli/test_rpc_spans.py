"""`serve --rpc-spans off`: no SERVER span on gRPC or Connect; each turn span continues the
caller's trace directly and names the RPC method, exported over real OTLP."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentskit_chat_client import ChatClient, Submit, TurnCompleted
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import EXAMPLES, Server, run_cli
from tests.telemetry.receiver import OtlpReceiver
from tests.transport.web.wire import stream, unary

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
GRPC_CALLER = "00f067aa0ba902b7"
CONNECT_CALLER = "b7ad6b7169203331"
STREAM_TURN = "agentskit.chat.v1.ChatService/StreamTurn"
CANARY = "canary-2b7e-rpc-spans-off"
HTTP_LISTENING = re.compile(r"http listening on 127\.0\.0\.1:(\d+)")
QUIET = {"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_METRIC_EXPORT_INTERVAL": "200"}


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as started:
        yield started


def traceparent(parent: str) -> str:
    return f"00-{TRACE_ID}-{parent}-01"


def http_port(server: Server) -> int:
    found = HTTP_LISTENING.search(server.stdout)
    assert found is not None, server.stdout
    return int(found.group(1))


async def grpc_turn(server: Server) -> None:
    async with ChatClient(server.target, timeout=30) as client:
        session = (await client.create_session("orders")).session_id
        events = client.stream_turn(
            session,
            Submit("/return"),
            turn_id="grpc",
            metadata=[("traceparent", traceparent(GRPC_CALLER))],
        )
        assert isinstance([e async for e in events][-1], TurnCompleted)
        events = client.stream_turn(session, Submit(CANARY), turn_id="canary")
        assert [e async for e in events]


async def connect_turn(server: Server) -> None:
    base = f"http://127.0.0.1:{http_port(server)}"
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        created = await unary(http, "CreateSession", {"definitionId": "orders"})
        session = created.json()["session"]["sessionId"]
        result = await stream(
            http,
            "StreamTurn",
            {"sessionId": session, "turnId": "connect", "submit": {"content": "/return"}},
            traceparent=traceparent(CONNECT_CALLER),
        )
        assert result.error is None
        assert "completed" in result.messages[-1]


def test_turn_spans_continue_the_callers_trace_without_server_spans(
    launch: Launcher, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    server = launch(
        tmp_path / "state",
        "--definitions",
        str(EXAMPLES),
        "--http-listen",
        "127.0.0.1:0",
        "--rpc-spans",
        "off",
        env=receiver.env(**QUIET),
    )

    async def scenario() -> None:
        await grpc_turn(server)
        await connect_turn(server)

    asyncio.run(scenario())
    turns = receiver.wait_for_spans(lambda s: s.name.startswith("chat.turn "), count=3)
    by_id = {span.attributes["agentskit.chat.turn.id"]: span for span in turns}
    for turn_id, caller, system in (
        ("grpc", GRPC_CALLER, "grpc"),
        ("connect", CONNECT_CALLER, "connect_rpc"),
    ):
        turn = by_id[turn_id]
        assert turn.trace_id == TRACE_ID
        assert turn.parent_span_id == caller
        assert turn.kind == "INTERNAL"
        assert turn.attributes["rpc.method"] == STREAM_TURN
        assert turn.attributes["rpc.system.name"] == system
    for system in ("grpc", "connect_rpc"):  # the call durations are kept
        receiver.wait_for_metric(
            "rpc.server.call.duration",
            lambda p, system=system: (  # type: ignore[misc]
                p.attributes["rpc.method"] == STREAM_TURN
                and p.attributes["rpc.system.name"] == system
            ),
        )
    server.send(15)
    assert server.wait() == 0
    spans = receiver.spans()
    assert spans  # the flush at the drain exported everything there was
    assert not [s for s in spans if s.kind == "SERVER"]
    exported = json.dumps([[s.name, s.attributes, s.status_message] for s in spans], default=str)
    assert CANARY not in exported
    assert CANARY not in server.stdout + server.stderr


def test_the_default_keeps_the_server_span_between_caller_and_turn(
    launch: Launcher, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    server = launch(tmp_path / "state", "--definitions", str(EXAMPLES), env=receiver.env(**QUIET))
    asyncio.run(grpc_turn(server))
    (turn,) = receiver.wait_for_spans(
        lambda s: (
            s.name.startswith("chat.turn ") and s.attributes["agentskit.chat.turn.id"] == "grpc"
        )
    )
    (rpc,) = receiver.wait_for_spans(lambda s: s.span_id == turn.parent_span_id)
    assert (rpc.kind, rpc.name) == ("SERVER", STREAM_TURN)
    assert rpc.parent_span_id == GRPC_CALLER
    assert "rpc.method" not in turn.attributes
    server.send(15)
    assert server.wait() == 0


def test_an_unknown_rpc_spans_value_from_the_environment_is_refused() -> None:
    result = run_cli("serve", "--listen", "127.0.0.1:0", env={"AGENTSKIT_CHAT_RPC_SPANS": "no"})
    assert result.returncode == 2
    assert "--rpc-spans must be on or off" in result.stderr


def test_rpc_spans_off_from_the_environment(
    launch: Launcher, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    env = receiver.env(**QUIET, AGENTSKIT_CHAT_RPC_SPANS="off")
    server = launch(tmp_path / "state", "--definitions", str(EXAMPLES), env=env)
    asyncio.run(grpc_turn(server))
    receiver.wait_for_spans(lambda s: s.name.startswith("chat.turn "), count=2)
    server.send(15)
    assert server.wait() == 0
    spans = receiver.spans()
    assert not [s for s in spans if s.kind == "SERVER"]
    (turn,) = [s for s in spans if s.attributes.get("agentskit.chat.turn.id") == "grpc"]
    assert turn.parent_span_id == GRPC_CALLER
