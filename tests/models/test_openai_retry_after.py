"""Retry-After on a passing failure: honoured within the wait cap, refused beyond it, and
ignored (the default backoff instead) when it is not a usable delay."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import aclosing
from datetime import UTC, datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

from agentskit_chat.conversation import Message, Role
from agentskit_chat.fakemodel import DEFAULT_CHUNKS, FakeModelServer, HttpResponse
from agentskit_chat.models import ModelChunk, ModelError, ModelRequest, OpenAIAdapter, TextChunk

REQUEST = ModelRequest("chat", "s1", (Message("u1", Role.USER, "Hello"),))
RETRY_DELAY = 0.125
AHEAD = 60
"""How far ahead the HTTP dates under test are, in seconds."""
MARGIN = 5.0
"""Slack on a wait computed from a date: the whole seconds of the date and the test's pace."""


def call(
    server: FakeModelServer, max_retry_wait: float
) -> tuple[list[float], list[ModelChunk], ModelError | None]:
    """The waits asked for, the chunks received and the error the stream ended with, if any."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def run() -> tuple[list[ModelChunk], ModelError | None]:
        model = {"adapter": "openai", "base_url": server.url, "model": "test-model"}
        adapter = OpenAIAdapter(
            model, retry_delay=RETRY_DELAY, max_retry_wait=max_retry_wait, sleep=sleep
        )
        try:
            async with aclosing(adapter.stream(REQUEST)) as chunks:
                return [chunk async for chunk in chunks], None
        except ModelError as exc:
            return [], exc
        finally:
            await adapter.close()

    chunks, error = asyncio.run(run())
    return waits, chunks, error


def rate_limited(retry_after: str) -> HttpResponse:
    return HttpResponse(429, '{"error": {"message": "slow down"}}', retry_after=retry_after)


def texts(chunks: list[ModelChunk]) -> list[str]:
    return [c.text for c in chunks if isinstance(c, TextChunk)]


def http_date(ahead: float, zone: str) -> str:
    """The HTTP date `ahead` seconds from now, its zone written as `zone` (empty: none)."""
    when = datetime.now(UTC) + timedelta(seconds=ahead)
    return format_datetime(when, usegmt=True).removesuffix(" GMT") + (f" {zone}" if zone else "")


@pytest.fixture
def away_from_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time five and a half hours off UTC, so that a date read as local time shows."""
    monkeypatch.setenv("TZ", "XYZ-05:30")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(("header", "wait"), [("1.5", 1.5), ("2", 2.0), ("0", 0.0)])
def test_a_retry_after_in_seconds_within_the_cap_is_waited_then_retried(
    server: FakeModelServer, header: str, wait: float
) -> None:
    server.enqueue(rate_limited(header))
    waits, chunks, error = call(server, max_retry_wait=2.0)
    assert error is None
    assert waits == [wait]
    assert texts(chunks) == list(DEFAULT_CHUNKS)
    assert len(server.requests) == 2


@pytest.mark.usefixtures("away_from_utc")
@pytest.mark.parametrize("zone", ["GMT", "+0000", "-0000", ""])
def test_a_retry_after_date_is_waited_until_read_as_utc_without_a_zone(
    server: FakeModelServer, zone: str
) -> None:
    server.enqueue(rate_limited(http_date(AHEAD, zone)))
    waits, chunks, error = call(server, max_retry_wait=AHEAD + MARGIN)
    assert error is None
    (wait,) = waits
    assert AHEAD - MARGIN <= wait <= AHEAD
    assert texts(chunks) == list(DEFAULT_CHUNKS)
    assert len(server.requests) == 2


def test_a_retry_after_date_in_another_zone_counts_its_offset(server: FakeModelServer) -> None:
    when = datetime.now(UTC) + timedelta(seconds=AHEAD)
    header = format_datetime(when.astimezone(timezone(timedelta(hours=-7))))
    assert header.endswith(" -0700")
    server.enqueue(rate_limited(header))
    waits, _, error = call(server, max_retry_wait=AHEAD + MARGIN)
    assert error is None
    (wait,) = waits
    assert AHEAD - MARGIN <= wait <= AHEAD


def test_a_retry_after_date_in_the_past_retries_at_once(server: FakeModelServer) -> None:
    server.enqueue(rate_limited("Thu, 01 Jan 1970 00:00:00 GMT"))
    waits, chunks, error = call(server, max_retry_wait=2.0)
    assert error is None
    assert waits == [0.0]
    assert texts(chunks) == list(DEFAULT_CHUNKS)


@pytest.mark.parametrize(
    "header",
    ["30", "2.001", http_date(3600, "GMT")],
    # Named, not shown: the date's test id would change with the second it is collected in,
    # and every test worker must collect the same ids.
    ids=["seconds", "seconds-just-over", "date-an-hour-ahead"],
)
def test_a_retry_after_over_the_cap_fails_at_once_without_waiting(
    server: FakeModelServer, header: str
) -> None:
    server.enqueue(rate_limited(header))
    waits, chunks, error = call(server, max_retry_wait=2.0)
    assert waits == []
    assert chunks == []
    assert error is not None
    assert (error.code, error.retryable) == ("model_rate_limited", True)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "header", ["inf", "-inf", "nan", "1e400", "-1", "-0.5", "soon", "", "Thu, 99 Foo 2024"]
)
def test_an_unusable_retry_after_counts_as_absent(server: FakeModelServer, header: str) -> None:
    server.enqueue(rate_limited(header))
    waits, chunks, error = call(server, max_retry_wait=2.0)
    assert error is None
    assert waits == [RETRY_DELAY]
    assert texts(chunks) == list(DEFAULT_CHUNKS)
    assert len(server.requests) == 2


def test_without_retry_after_the_default_backoff_is_waited(server: FakeModelServer) -> None:
    server.enqueue(HttpResponse(503))
    waits, chunks, error = call(server, max_retry_wait=2.0)
    assert error is None
    assert waits == [RETRY_DELAY]
    assert texts(chunks) == list(DEFAULT_CHUNKS)
