"""The listener's bounded log: the rate limit, the one-line summaries, and what it leaves
alone."""

from __future__ import annotations

import asyncio
import logging

from agentskit_chat.transport.web.boundary import logbound as _logbound
from tests.transport.web.raw import captured


def test_the_rate_limit_lets_a_burst_through_then_one_line_per_refill() -> None:
    now = [0.0]
    limit = _logbound.RateLimit(burst=3, refill_seconds=5.0, clock=lambda: now[0])
    assert [limit.take() for _ in range(5)] == [0, 0, 0, None, None]
    now[0] += 4.9
    assert limit.take() is None
    now[0] += 0.1
    assert limit.take() == 3  # the three held back since the last line let through
    assert limit.take() is None
    now[0] += 3600
    assert [limit.take() for _ in range(4)] == [1, 0, 0, None]


def test_a_summary_names_the_type_and_place_never_the_message() -> None:
    def fail() -> None:
        raise ValueError("GET /secret-path?token=abc")

    try:
        try:
            fail()
        except ValueError as error:
            raise ExceptionGroup("wrapped", [error]) from None
    except ExceptionGroup as group:
        text = _logbound.summary(group)
    assert text.startswith("ValueError at boundary/test_logbound.py:")
    assert "secret" not in text


def test_refused_lines_are_one_short_line_each() -> None:
    with captured() as log:
        log.mark()
        _logbound.refused("x" * 1000 + "\nsecond line")
        (line,) = log.lines()
        assert line["level"] == "warning"
        assert len(line["event"]) == _logbound.MAX_EVENT_CHARS
        assert "\n" not in line["event"]
        log.assert_bounded()


def test_other_asyncio_errors_keep_their_traceback() -> None:
    """Only exceptions raised through Hypercorn are summarised; the loop's other errors are
    logged as asyncio logs them."""
    _logbound.bounded_errorlog()

    async def scenario() -> None:
        async def fail() -> None:
            raise RuntimeError("not the listener's")

        def on_done(task: asyncio.Task[None]) -> None:
            asyncio.get_running_loop().call_exception_handler(
                {"message": "a task failed", "exception": task.exception(), "task": task}
            )

        task = asyncio.create_task(fail())
        task.add_done_callback(on_done)
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)

    with captured() as log:
        log.mark()
        asyncio.run(scenario())
        (line,) = [line for line in log.lines() if line["logger"] == "asyncio"]
        assert line["level"] == "error"
        assert line["exception"][0]["exc_type"] == "RuntimeError"
        assert logging.getLogger("asyncio").filters.count(_logbound._ASYNCIO_FILTER) == 1
