"""What every framework front shares: how a refusal becomes an HTTP status and code."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentskit_chat.service import Reason, ServiceError
from agentskit_chat.service._errors import invalid, limit_exceeded
from agentskit_chat.transport.web.boundary.fronts import FrontError, sse
from tests.transport.conftest import run
from tests.transport.web.conftest import web_live


def test_a_refusal_keeps_its_reason_as_a_plain_code_and_its_field() -> None:
    error = FrontError.of(invalid("messages[0].content", "must not be empty"))
    assert (error.status, error.code, error.field) == (
        400,
        "invalid_argument",
        "messages[0].content",
    )
    assert error.headers() == []


def test_a_size_limit_is_413_without_a_delay_and_a_count_limit_429_with_one() -> None:
    too_large = FrontError.of(limit_exceeded("input_bytes", 10, "content is too large"))
    assert (too_large.status, too_large.code, too_large.retry_after_seconds) == (
        413,
        "limit_exceeded",
        None,
    )
    too_many = FrontError.of(limit_exceeded("watchers_per_session", 2, "too many watchers"))
    assert (too_many.status, too_many.headers()) == (429, [(b"retry-after", b"1")])


def test_a_busy_session_says_when_to_come_back_in_whole_seconds() -> None:
    busy = FrontError.of(ServiceError(Reason.SESSION_BUSY, "busy", retry_after_ms=1500))
    assert (busy.status, busy.code, busy.retry_after_seconds) == (409, "session_busy", 2)


def test_an_event_spanning_lines_keeps_each_line_as_data() -> None:
    assert sse("a\nb", event="x", event_id="7") == b"id: 7\nevent: x\ndata: a\ndata: b\n\n"


@pytest.mark.parametrize(
    ("path", "then"),
    [
        ("/v1/chat/completions", "/v1/models"),
        ("/agui/probe", "/healthz"),
        ("/ai-sdk/probe", "/healthz"),
    ],
    ids=["openai", "agui", "aisdk"],
)
def test_a_body_too_large_closes_its_connection_and_says_so(
    tmp_path: Path, path: str, then: str
) -> None:
    """The body is left unread, so the connection ends with the 413: `Connection: close`
    tells a keep-alive client to open another for its next request."""

    async def scenario() -> None:
        async with web_live(tmp_path, max_request_bytes=1024) as web:
            big = await web.http.post(path, content=b"{" + b" " * 4096 + b"}")
            assert big.status_code == 413
            assert big.headers["connection"] == "close"
            assert (await web.http.get(then)).status_code in (200, 401)

    run(scenario())
