"""Every way an `openai` call fails: a stable code, the retryable flag, one bounded retry
before the first chunk, and messages that never echo the upstream body, URL or key."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from contextlib import aclosing
from typing import Any

import pytest

from agentskit_chat.conversation import Message, Role
from agentskit_chat.fakemodel import (
    DEFAULT_CHUNKS,
    Ending,
    FakeModelServer,
    Hangup,
    HttpResponse,
    Reply,
    Script,
    Stall,
)
from agentskit_chat.models import ModelChunk, ModelError, ModelRequest, OpenAIAdapter, TextChunk

CANARY = "canary-5d1e-upstream-body"
SECRET = "sk-canary-secret-4411"
ERROR_BODY = f'{{"error": {{"message": "{CANARY}", "type": "server_error"}}}}'
REQUEST = ModelRequest("chat", "s1", (Message("u1", Role.USER, "Hello"),))


def settings(base_url: str, **extra: Any) -> dict[str, Any]:
    return {"adapter": "openai", "base_url": base_url, "model": "test-model", **extra}


def call(model: dict[str, Any]) -> tuple[list[ModelChunk], ModelError | None]:
    """The chunks received, then the error that ended the stream (None when it finished)."""

    async def run() -> tuple[list[ModelChunk], ModelError | None]:
        adapter = OpenAIAdapter(model, retry_delay=0.01)
        received: list[ModelChunk] = []
        try:
            async with aclosing(adapter.stream(REQUEST)) as chunks:
                async for chunk in chunks:
                    received.append(chunk)
        except ModelError as exc:
            return received, exc
        finally:
            await adapter.close()
        return received, None

    return asyncio.run(run())


def assert_safe(error: ModelError, *secrets: str) -> None:
    """Nothing of the upstream body, the URL or a secret is in the error."""
    shown = " ".join([str(error), repr(error), error.message, *map(str, error.args)])
    for secret in (CANARY, "127.0.0.1", *secrets):
        assert secret not in shown
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port that is bound but not listening: connections to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


FAILURES = [
    pytest.param([HttpResponse(500, ERROR_BODY)] * 2, "model_server_error", True, 2, id="500"),
    pytest.param([HttpResponse(503, ERROR_BODY)] * 2, "model_server_error", True, 2, id="503"),
    pytest.param(
        [HttpResponse(429, ERROR_BODY, retry_after="0")] * 2,
        "model_rate_limited",
        True,
        2,
        id="429-twice",
    ),
    pytest.param(
        [HttpResponse(429, ERROR_BODY, retry_after="30")],
        "model_rate_limited",
        True,
        1,
        id="429-wait-over-cap",
    ),
    pytest.param([HttpResponse(401, ERROR_BODY)], "model_unauthorized", False, 1, id="401"),
    pytest.param([HttpResponse(403, ERROR_BODY)], "model_unauthorized", False, 1, id="403"),
    pytest.param([HttpResponse(404, ERROR_BODY)], "model_not_found", False, 1, id="404"),
    pytest.param([HttpResponse(400, ERROR_BODY)], "model_rejected", False, 1, id="400"),
    pytest.param([HttpResponse(422, ERROR_BODY)], "model_rejected", False, 1, id="422"),
    pytest.param([Hangup(), Hangup()], "model_unavailable", True, 2, id="hangup"),
    pytest.param(
        [HttpResponse(200, f'{{"text": "{CANARY}"}}')],
        "model_protocol_error",
        False,
        1,
        id="not-an-event-stream",
    ),
]


@pytest.mark.parametrize(("scripts", "code", "retryable", "requests"), FAILURES)
def test_failures_before_the_stream_map_to_stable_codes(
    server: FakeModelServer, scripts: list[Script], code: str, retryable: bool, requests: int
) -> None:
    server.enqueue(*scripts)
    chunks, error = call(settings(server.url))
    assert chunks == []
    assert error is not None
    assert (error.code, error.retryable) == (code, retryable)
    assert_safe(error)
    assert len(server.requests) == requests


@pytest.mark.parametrize(
    "first",
    [
        pytest.param(HttpResponse(500, ERROR_BODY), id="500"),
        pytest.param(HttpResponse(429, ERROR_BODY, retry_after="0"), id="429-retry-after"),
        pytest.param(HttpResponse(429, ERROR_BODY), id="429-no-retry-after"),
        pytest.param(Hangup(), id="hangup"),
    ],
)
def test_one_retry_after_a_passing_failure_can_succeed(
    server: FakeModelServer, first: Script
) -> None:
    server.enqueue(first)
    chunks, error = call(settings(server.url))
    assert error is None
    assert [c.text for c in chunks if isinstance(c, TextChunk)] == list(DEFAULT_CHUNKS)
    assert len(server.requests) == 2


def test_an_unreachable_endpoint_is_retried_once_then_reported(closed_port: int) -> None:
    chunks, error = call(settings(f"http://127.0.0.1:{closed_port}/v1"))
    assert chunks == []
    assert error is not None
    assert (error.code, error.retryable) == ("model_unavailable", True)
    assert_safe(error, str(closed_port))


def test_a_silent_model_times_out_and_is_retried_once(server: FakeModelServer) -> None:
    server.enqueue(Stall(), Stall())
    chunks, error = call(settings(server.url, timeout=0.5))
    assert chunks == []
    assert error is not None
    assert (error.code, error.retryable) == ("model_timeout", True)
    assert len(server.requests) == 2
    assert_safe(error)


def test_a_timeout_then_an_answer_succeeds(server: FakeModelServer) -> None:
    server.enqueue(Stall())
    chunks, error = call(settings(server.url, timeout=0.5))
    assert error is None
    assert [c.text for c in chunks if isinstance(c, TextChunk)] == list(DEFAULT_CHUNKS)
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("ending", "code", "retryable"),
    [
        (Ending.MALFORMED, "model_protocol_error", False),
        (Ending.TRUNCATE, "model_protocol_error", True),
        (Ending.DROP, "model_protocol_error", True),
        (Ending.STALL, "model_timeout", True),
    ],
)
def test_a_stream_failing_after_its_first_chunk_is_never_retried(
    server: FakeModelServer, ending: Ending, code: str, retryable: bool
) -> None:
    server.enqueue(Reply(chunks=("one ", "two"), ending=ending))
    chunks, error = call(settings(server.url, timeout=0.5))
    assert [c.text for c in chunks if isinstance(c, TextChunk)] == ["one ", "two"]
    assert error is not None
    assert (error.code, error.retryable) == (code, retryable)
    assert len(server.requests) == 1  # The default reply was there to take a retry.
    assert_safe(error)


CUT_EVENT = 'data: {"choices": [{"delta": {"content": "cut'
"""An event the body ends in the middle of: its JSON is cut, and so is its blank line."""


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(CUT_EVENT, id="cut-json"),
        pytest.param(CUT_EVENT + '"}}]}\n', id="cut-before-blank-line"),
    ],
)
def test_a_body_ending_in_the_middle_of_its_first_event_is_truncation_and_retried(
    server: FakeModelServer, body: str
) -> None:
    server.enqueue(*[HttpResponse(200, body, content_type="text/event-stream")] * 2)
    chunks, error = call(settings(server.url))
    assert chunks == []
    assert error is not None
    assert (error.code, error.retryable) == ("model_protocol_error", True)
    assert error.message == "the model stream ended before it finished"
    assert len(server.requests) == 2
    assert_safe(error)


FIRST = 'data: {"choices": [{"delta": {"content": "one "}}]}\n\n'
FINISH = 'data: {"choices": [{"delta": {}, "finish_reason": "stop"}]}\n\n'


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(FIRST + CUT_EVENT, id="cut-json"),
        pytest.param(
            FIRST + FINISH + 'data: {"choices": [], "usage": {"prompt_tokens": 1', id="cut-usage"
        ),
        pytest.param(FIRST + FINISH + "data: [DONE]", id="done-without-blank-line"),
    ],
)
def test_a_body_ending_in_the_middle_of_a_later_event_is_truncation(
    server: FakeModelServer, body: str
) -> None:
    server.enqueue(HttpResponse(200, body, content_type="text/event-stream"))
    chunks, error = call(settings(server.url))
    assert [c.text for c in chunks if isinstance(c, TextChunk)] == ["one "]
    assert error is not None
    assert (error.code, error.retryable) == ("model_protocol_error", True)
    assert len(server.requests) == 1
    assert_safe(error)


def test_an_error_event_in_the_stream_is_a_server_error(server: FakeModelServer) -> None:
    body = f'data: {{"error": {{"message": "{CANARY}"}}}}\n\n'
    server.enqueue(*[HttpResponse(200, body, content_type="text/event-stream")] * 2)
    chunks, error = call(settings(server.url))
    assert chunks == []
    assert error is not None
    assert (error.code, error.retryable) == ("model_server_error", True)
    assert len(server.requests) == 2
    assert_safe(error)


def test_the_api_key_never_shows_in_errors(
    server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODEL_TEST_KEY", SECRET)
    server.enqueue(HttpResponse(401, f'{{"error": "bad key {SECRET}"}}'))
    chunks, error = call(settings(server.url, api_key_env="FAKE_MODEL_TEST_KEY"))
    assert chunks == []
    assert error is not None
    assert (error.code, error.retryable) == ("model_unauthorized", False)
    assert_safe(error, SECRET)
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"


def test_a_static_header_never_shows_in_errors(server: FakeModelServer) -> None:
    server.enqueue(HttpResponse(401, f'{{"error": "bad api-key {SECRET}"}}'))
    chunks, error = call(settings(server.url, headers={"api-key": SECRET}))
    assert chunks == []
    assert error is not None
    assert (error.code, error.retryable) == ("model_unauthorized", False)
    assert_safe(error, SECRET)
    assert server.requests[0].headers["api-key"] == SECRET


def test_a_missing_api_key_fails_before_any_request(
    server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FAKE_MODEL_TEST_KEY", raising=False)
    chunks, error = call(settings(server.url, api_key_env="FAKE_MODEL_TEST_KEY"))
    assert chunks == []
    assert error is not None
    assert (error.code, error.retryable) == ("model_credentials_missing", False)
    assert "FAKE_MODEL_TEST_KEY" not in error.message
    assert server.requests == []


def test_an_unusable_api_key_is_refused_without_showing_it(
    server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODEL_TEST_KEY", f"{SECRET} with spaces")
    chunks, error = call(settings(server.url, api_key_env="FAKE_MODEL_TEST_KEY"))
    assert chunks == []
    assert error is not None
    assert (error.code, error.retryable) == ("model_credentials_invalid", False)
    assert_safe(error, SECRET)
    assert server.requests == []


def test_a_retry_after_date_is_honoured(server: FakeModelServer) -> None:
    server.enqueue(HttpResponse(429, ERROR_BODY, retry_after="Thu, 01 Jan 1970 00:00:00 GMT"))
    chunks, error = call(settings(server.url))
    assert error is None
    assert [c.text for c in chunks if isinstance(c, TextChunk)] == list(DEFAULT_CHUNKS)
    assert len(server.requests) == 2
