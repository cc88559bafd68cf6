"""A real `serve` process exporting over OTLP/gRPC to a receiver the tests start."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from agentskit_chat.fakemodel import FakeModelServer
from agentskit_chat_client import ChatClient, ChatError, Retry, Submit, TurnCompleted
from tests.cli.conftest import Launcher
from tests.cli.fixtures import traced_chat
from tests.cli.fixtures.serving import EXAMPLES, Server, health_status
from tests.cli.test_model_turns import write_assistant
from tests.cli.test_prometheus import lease_conflict
from tests.telemetry.receiver import OtlpReceiver, ReceivedSpan

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TURN_METRICS = {
    "agentskit.chat.turns",
    "agentskit.chat.turn.duration",
    "agentskit.chat.turn.time_to_first_chunk",
    "rpc.server.call.duration",
}
STREAM_TURN = "agentskit.chat.v1.ChatService/StreamTurn"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as started:
        yield started


def turn_spans(receiver: OtlpReceiver, count: int) -> list[ReceivedSpan]:
    return receiver.wait_for_spans(lambda s: s.name.startswith("chat.turn "), count=count)


def by_turn(spans: list[ReceivedSpan]) -> dict[str, ReceivedSpan]:
    return {span.attributes["agentskit.chat.turn.id"]: span for span in spans}


def log_lines(server: Server) -> list[dict[str, Any]]:
    """The JSON log lines of a stopped server's stdout."""
    return [json.loads(line) for line in server.stdout.splitlines() if line.startswith("{")]


def stop(server: Server) -> None:
    server.send(signal.SIGTERM)
    assert server.wait() == 0


def test_each_kind_of_turn_exports_its_decision_as_a_child_of_the_grpc_span(
    launch: Launcher, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    server = launch(
        tmp_path / "state", "--definitions", str(EXAMPLES), env=receiver.env(), log_level="INFO"
    )

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            orders = (await client.create_session("orders")).session_id
            await client.run_turn(orders, Submit("/retrun"), turn_id="repaired")
            await client.run_turn(orders, Submit("/help"), turn_id="fallback")
            await client.run_turn(orders, Retry(), turn_id="replayed")
            other = (await client.create_session("orders")).session_id
            await client.run_turn(other, Submit("/return"), turn_id="deterministic")
            support = (await client.create_session("support")).session_id
            await client.run_turn(support, Submit("what can you do?"), turn_id="agentic")
        await health_status(server.target)

    asyncio.run(scenario())
    turns = by_turn(turn_spans(receiver, 5))
    expected = {
        "deterministic": ("deterministic", "begin", "browsing", "identifying", False),
        "repaired": ("repaired", "begin-typo", "browsing", "identifying", False),
        "fallback": ("fallback", "help", "identifying", "identifying", False),
        "replayed": ("fallback", "help", "identifying", "identifying", True),
        "agentic": ("agentic", None, "idle", "idle", False),
    }
    for turn_id, (kind, route, source, target, replayed) in expected.items():
        attributes = turns[turn_id].attributes
        assert attributes["agentskit.chat.kind"] == kind
        assert attributes.get("agentskit.chat.route.id") == route
        assert attributes["agentskit.chat.from_state"] == source
        assert attributes["agentskit.chat.to_state"] == target
        assert attributes["agentskit.chat.replayed"] is replayed
        assert attributes["agentskit.chat.outcome"] == "completed"
        assert attributes["agentskit.chat.definition.revision"] == 1
    assert turns["agentic"].attributes["agentskit.chat.definition.id"] == "support"
    assert turns["replayed"].attributes["agentskit.chat.operation"] == "retry"

    # The StreamTurn server spans end after their turn spans, so they may come in a later
    # export batch: wait for every one of them.
    parents = {turn.parent_span_id for turn in turns.values()}
    receiver.wait_for_spans(lambda s: s.span_id in parents, count=len(parents))
    spans = receiver.spans()
    servers = {s.span_id: s for s in spans if s.kind == "SERVER"}
    for turn in turns.values():
        parent = servers[turn.parent_span_id]  # type: ignore[index]
        assert parent.name == STREAM_TURN
        assert parent.trace_id == turn.trace_id
        assert parent.attributes["rpc.method"] == STREAM_TURN
        assert parent.attributes["rpc.system.name"] == "grpc"
        assert parent.attributes["rpc.response.status_code"] == "OK"
        assert not [key for key in parent.attributes if key.startswith(("net.", "rpc.grpc."))]
    # The offline adapter calls no model: an agentic turn, but no GenAI span or metric.
    assert not [s for s in spans if s.kind == "CLIENT"]
    assert turns["agentic"].attributes["agentskit.chat.kind"] == "agentic"
    assert not [s for s in spans if "Health" in s.name]  # health checks make no spans

    for name in TURN_METRICS:
        receiver.wait_for_metric(name)
    counted = receiver.wait_for_metric(
        "agentskit.chat.turns", lambda p: p.attributes.get("agentskit.chat.kind") == "repaired"
    )
    assert counted[-1].attributes["agentskit.chat.definition.id"] == "orders"
    calls = receiver.wait_for_metric(
        "rpc.server.call.duration", lambda p: p.attributes["rpc.method"] == STREAM_TURN
    )
    assert calls[-1].attributes["rpc.response.status_code"] == "OK"
    assert calls[-1].unit == "s"
    stop(server)
    assert not receiver.metric_points("gen_ai.client.operation.duration")
    assert not receiver.metric_points("gen_ai.client.token.usage")
    logged = [line for line in log_lines(server) if line.get("event") == "turn"]
    assert {line["turn_id"] for line in logged} == set(expected)
    for line in logged:
        span = turns[line["turn_id"]]
        assert (line["trace_id"], line["span_id"]) == (span.trace_id, span.span_id)
        assert line["kind"] == span.attributes["agentskit.chat.kind"]
        assert line["duration_ms"] >= 0


def test_a_client_traceparent_is_continued_by_the_server_and_turn_spans(
    launch: Launcher, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    server = launch(tmp_path / "state", "--definitions", str(EXAMPLES), env=receiver.env())
    traceparent = f"00-{TRACE_ID}-{PARENT_ID}-01"

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            session = (await client.create_session("orders")).session_id
            events = client.stream_turn(
                session, Submit("/return"), metadata=[("traceparent", traceparent)]
            )
            assert isinstance([e async for e in events][-1], TurnCompleted)

    asyncio.run(scenario())
    (turn,) = turn_spans(receiver, 1)
    # The StreamTurn server span ends after the turn span: it may come in a later batch.
    (grpc_span,) = receiver.wait_for_spans(lambda s: s.span_id == turn.parent_span_id)
    assert (turn.trace_id, grpc_span.trace_id) == (TRACE_ID, TRACE_ID)
    assert grpc_span.parent_span_id == PARENT_ID
    stop(server)


def test_turns_succeed_while_the_collector_is_down_and_the_failure_is_logged_once(
    launch: Launcher, tmp_path: Path
) -> None:
    with OtlpReceiver() as gone:
        env = gone.env()  # a port that had a collector and has none any more
    server = launch(tmp_path / "state", "--definitions", str(EXAMPLES), env=env)

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            session = (await client.create_session("orders")).session_id
            for number in range(6):
                result = await client.run_turn(session, Submit("/help"))
                assert result.completed, number
                await asyncio.sleep(0.3)  # several export rounds fail meanwhile

    asyncio.run(scenario())
    stop(server)
    exporter_lines = [
        line
        for line in log_lines(server)
        if line.get("logger", "").startswith("opentelemetry") and line["level"] != "debug"
    ]
    templates = [line["event"] for line in exporter_lines]
    assert templates, "the export failure was not logged"
    assert len(templates) == len(set(templates)), templates


def test_route_code_records_spans_and_metrics_through_the_global_api(
    launch: Launcher, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    server = launch(
        tmp_path / "state",
        "--definitions-module",
        "tests.cli.fixtures.traced_chat",
        env=receiver.env(),
    )

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            session = (await client.create_session("inventory")).session_id
            result = await client.run_turn(session, Submit("/stock"))
            assert result.completed is not None
            assert result.completed.content == "In stock."

    asyncio.run(scenario())
    (lookup,) = receiver.wait_for_spans(lambda s: s.name == traced_chat.SPAN)
    assert lookup.scope == traced_chat.SCOPE
    assert lookup.attributes == {"inventory.hit": True}
    assert lookup.resource["service.name"] == "agentskit-chat"
    (turn,) = turn_spans(receiver, 1)
    # The turn span is current while route code runs: the code's span is its child.
    assert lookup.parent_span_id == turn.span_id
    assert lookup.trace_id == turn.trace_id
    # The StreamTurn server span ends after the turn span: it may come in a later batch.
    (grpc_span,) = receiver.wait_for_spans(lambda s: s.span_id == turn.parent_span_id)
    assert grpc_span.name == STREAM_TURN
    (counted,) = receiver.wait_for_metric(traced_chat.METRIC)
    assert counted.value == 1
    stop(server)


def test_client_mistakes_are_not_server_errors_and_rejected_turns_keep_their_definition(
    launch: Launcher, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    with FakeModelServer() as model:
        definitions = write_assistant(tmp_path / "definitions", model.url)
        server = launch(tmp_path / "state", "--definitions", str(definitions), env=receiver.env())

        async def scenario() -> None:
            async with ChatClient(server.target, timeout=30) as client:
                session = (await client.create_session("assistant")).session_id
                await lease_conflict(client, model, session)  # ABORTED, SESSION_BUSY
                with pytest.raises(ChatError) as missing:
                    await client.get_session("s-missing-0000")
                assert missing.value.code == grpc.StatusCode.NOT_FOUND

        asyncio.run(scenario())
        stop(server)
    rejected = receiver.wait_for_spans(
        lambda s: s.attributes.get("agentskit.chat.outcome") == "rejected"
    )
    (busy,) = rejected
    assert busy.status == "UNSET"
    assert busy.attributes["agentskit.chat.error.code"] == "SESSION_BUSY"
    assert busy.attributes["agentskit.chat.definition.id"] == "assistant"
    assert busy.events == []
    servers = {
        s.attributes["rpc.response.status_code"]: s for s in receiver.spans() if s.kind == "SERVER"
    }
    for code in ("ABORTED", "NOT_FOUND"):
        assert servers[code].status == "UNSET", code
        assert servers[code].events == [], code  # no exception event, no stack trace
        assert "error.type" not in servers[code].attributes
    assert servers["ABORTED"].span_id == busy.parent_span_id
    refused = receiver.wait_for_metric(
        "rpc.server.call.duration", lambda p: p.attributes["rpc.response.status_code"] != "OK"
    )
    assert {p.attributes["rpc.response.status_code"] for p in refused} >= {"ABORTED", "NOT_FOUND"}
    assert not [p for p in refused if "error.type" in p.attributes]
