"""Agentic turns of a real `serve` process against the fake model server over HTTP."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import grpc
import pytest

from agentskit_chat.fakemodel import FakeModelServer, Reply
from agentskit_chat_client import ChatClient, ChatError, Submit, TurnCompleted, TurnFailed
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import collect, complete_when_free, terminal
from tests.telemetry.receiver import OtlpReceiver
from tests.waiting import EVENT_WAIT


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


def write_assistant(directory: Path, base_url: str, extra: str = "") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "assistant.yaml").write_text(
        "id: assistant\nrevision: 1\n"
        f"model: {{adapter: openai, base_url: '{base_url}', model: fake-1{extra}}}\n"
        "conversation:\n  initial: open\n  states: {open: {on: {hello: open}}}\n"
        "  routes: [{id: hello, command: /hello, event: hello, response: Hi.}]\n",
        encoding="utf-8",
    )
    return directory


def test_a_turn_past_its_deadline_hangs_up_on_the_model_and_changes_nothing(
    launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> None:
    definitions = write_assistant(tmp_path / "definitions", model.url)
    server = launch(tmp_path / "state", "--definitions", str(definitions), "--turn-timeout", "1")
    model.enqueue(Reply(chunks=("first ", "never sent"), pause_after=1))

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            session = await client.create_session("assistant")
            failed = terminal(await collect(client, session.session_id, Submit("slow")))
            assert isinstance(failed, TurnFailed)
            assert (failed.code, failed.retryable) == ("deadline_exceeded", True)
            assert await asyncio.to_thread(model.wait_disconnect, 10)
            after = await client.get_session(session.session_id)
            assert after.messages == ()  # the failed turn committed nothing
            answered = terminal(await collect(client, session.session_id, Submit("again")))
            assert isinstance(answered, TurnCompleted)

    asyncio.run(scenario())
    assert model.requests[0].disconnected.is_set()
    assert model.requests[0].chunks_sent == 1


def test_usage_reaches_the_completed_event_the_genai_span_and_the_token_metric(
    launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> None:
    """The GenAI span and metrics follow the conventions, and the model request carries
    the GenAI span's trace context, read here at the model server."""
    definitions = write_assistant(
        tmp_path / "definitions", model.url, ", temperature: 0.3, max_tokens: 64"
    )
    model.enqueue(Reply(chunks=("One ", "two ", "three."), usage=(21, 3)))
    with OtlpReceiver() as receiver:
        server = launch(tmp_path / "state", "--definitions", str(definitions), env=receiver.env())

        async def scenario() -> None:
            async with ChatClient(server.target, timeout=30) as client:
                session = await client.create_session("assistant")
                events = await collect(client, session.session_id, Submit("count"))
                done = terminal(events)
                assert isinstance(done, TurnCompleted)
                assert done.content == "One two three."
                assert done.usage is not None
                assert (done.usage.input_tokens, done.usage.output_tokens) == (21, 3)

        asyncio.run(scenario())
        (span,) = receiver.wait_for_spans(lambda s: s.kind == "CLIENT")
        assert span.name == "chat fake-1"
        assert span.attributes["gen_ai.provider.name"] == "openai"
        assert span.attributes["gen_ai.request.model"] == "fake-1"
        assert span.attributes["gen_ai.usage.input_tokens"] == 21
        assert span.attributes["gen_ai.usage.output_tokens"] == 3
        endpoint = urlsplit(model.url)
        assert span.attributes["server.address"] == endpoint.hostname
        assert span.attributes["server.port"] == endpoint.port
        assert span.attributes["gen_ai.request.temperature"] == 0.3
        assert span.attributes["gen_ai.request.max_tokens"] == 64
        assert span.attributes["gen_ai.response.model"] == "fake-1"
        assert span.attributes["gen_ai.response.id"].startswith("chatcmpl-fake-")
        assert "error.type" not in span.attributes
        (request,) = model.requests
        version, trace_id, parent_id, flags = request.headers["traceparent"].split("-")
        assert (version, trace_id, parent_id) == ("00", span.trace_id, span.span_id)
        assert int(flags, 16) & 1  # sampled
        (turn,) = receiver.wait_for_spans(lambda s: s.span_id == span.parent_span_id)
        assert turn.name == "chat.turn submit"
        tokens = receiver.wait_for_metric("gen_ai.client.token.usage")
        assert {p.attributes["gen_ai.token.type"]: p.value for p in tokens} == {
            "input": 21,
            "output": 3,
        }
        duration = receiver.wait_for_metric("gen_ai.client.operation.duration")[-1]
        assert duration.attributes["server.address"] == endpoint.hostname
        assert duration.attributes["server.port"] == endpoint.port
        assert duration.attributes["gen_ai.response.model"] == "fake-1"
        server.send(signal.SIGTERM)
        assert server.wait() == 0


def test_a_client_deadline_shorter_than_the_turn_timeout_hangs_up_on_the_model(
    launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> None:
    definitions = write_assistant(tmp_path / "definitions", model.url)
    server = launch(tmp_path / "state", "--definitions", str(definitions))
    model.enqueue(Reply(chunks=("first ", "never sent"), pause_after=1))

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            session = await client.create_session("assistant")
            deadline = 1.0
            while not model.requests:  # a busy machine may need longer to reach the model
                assert deadline < 64, "the model was never reached before the deadline"
                async with ChatClient(server.target, timeout=deadline) as hasty:
                    with pytest.raises(ChatError) as ended:
                        await collect(hasty, session.session_id, Submit("slow"))
                    assert ended.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
                # The turn is over once its session is free (a route answers, not the model):
                # by then it reached the model or never will.
                await complete_when_free(client, session.session_id, Submit("/hello"))
                deadline *= 2
            assert await asyncio.to_thread(model.wait_disconnect, EVENT_WAIT)
            answered = terminal(await collect(client, session.session_id, Submit("again")))
            assert isinstance(answered, TurnCompleted)  # the lease was given back

    asyncio.run(scenario())
    assert model.requests[0].chunks_sent == 1
