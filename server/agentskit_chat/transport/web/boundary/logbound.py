"""The HTTP listener's log: one short line per refused request, never a traceback, rate limited.

A request the listener refuses (an undecodable header, a websocket upgrade) and a connection
that Hypercorn or h2 end with an exception (a malformed `HTTP2-Settings`, DATA on a stream
already answered) are each worth a line to an operator, and nothing more: their tracebacks
quote what the client sent (paths, header values) and cost the server far more log than
the request cost the client. So:

- `refused()` writes one WARNING line of fixed text, at most `MAX_EVENT_CHARS` long.
- `bounded_errorlog()` is the logger the listener hands Hypercorn (`config.errorlog`); a
  filter on it, and one on the `asyncio` logger (where an exception raised in a Hypercorn
  task the listener does not await may surface; one that ends a connection is caught by
  the listener and written with `refused` itself), replace every
  record carrying an exception raised through Hypercorn by one such line naming only the
  exception's type and the innermost frame's file and line, never its message.
- All of these lines share one token bucket (`BURST` lines, then one per `REFILL_SECONDS`);
  the next line let through counts those suppressed, so a flood of bad requests costs the
  log a few lines a minute.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from pathlib import PurePath
from types import TracebackType
from typing import Final

LOGGER_NAME: Final = "agentskit_chat.transport.http"
MAX_EVENT_CHARS: Final = 150
"""Longest event text; a JSON line with its timestamp, level and logger stays under 300 bytes."""
BURST: Final = 5
REFILL_SECONDS: Final = 5.0
_THIRD_PARTY: Final = ("hypercorn", "h11", "h2", "hpack", "hyperframe", "wsproto")

log = logging.getLogger(LOGGER_NAME)


class RateLimit:
    """A token bucket over log lines: `burst` at once, then one per `refill_seconds`."""

    def __init__(
        self,
        burst: int = BURST,
        refill_seconds: float = REFILL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._burst = burst
        self._refill = refill_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._stamp = clock()
        self._suppressed = 0

    def take(self) -> int | None:
        """The number of lines suppressed since the last one let through, when this one may
        be written; None when it must be suppressed (and is counted)."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self._burst, self._tokens + (now - self._stamp) / self._refill)
            self._stamp = now
            if self._tokens < 1:
                self._suppressed += 1
                return None
            self._tokens -= 1
            suppressed, self._suppressed = self._suppressed, 0
            return suppressed


LIMIT = RateLimit()


def refused(what: str, *, level: int = logging.WARNING) -> None:
    """Write one line `http listener: <what>`, unless the rate limit holds it back.

    `what` must be fixed text (or a type or file name): never anything the client sent.
    """
    if not log.isEnabledFor(level):
        return
    suppressed = LIMIT.take()
    if suppressed is None:
        return
    event = f"http listener: {what}"
    if suppressed:
        event += f" ({suppressed} similar lines suppressed)"
    log.log(level, "%s", _clip(event))


def connection_failed(exc: BaseException) -> None:
    """The line for a connection that ended on `exc`: a protocol error when it was raised
    through Hypercorn or h2, any other error otherwise."""
    kind = "a protocol error" if _through_hypercorn(exc) else "an error"
    refused(f"connection closed on {kind}: {summary(exc)}")


def _clip(text: str) -> str:
    text = text.replace("\n", " ").replace("\r", " ")
    return text if len(text) <= MAX_EVENT_CHARS else text[: MAX_EVENT_CHARS - 3] + "..."


def summary(exc: BaseException) -> str:
    """The innermost exception's type and where it was raised, with nothing of its message."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    kind = type(exc)
    name = (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )
    return f"{name}{_innermost(exc.__traceback__)}"


def _innermost(tb: TracebackType | None) -> str:
    frame = None
    while tb is not None:
        frame = tb.tb_frame
        tb = tb.tb_next
    if frame is None:
        return ""
    path = PurePath(frame.f_code.co_filename)
    return f" at {path.parent.name}/{path.name}:{frame.f_lineno}"


def _through_hypercorn(exc: BaseException) -> bool:
    """Whether `exc` (or the first exception of a group) passed through Hypercorn's frames."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        tb = current.__traceback__
        while tb is not None:
            if _third_party(tb.tb_frame.f_code.co_filename):
                return True
            tb = tb.tb_next
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return False


def _third_party(filename: str) -> bool:
    parts = PurePath(filename).parts
    return any(part in _THIRD_PARTY for part in parts[-4:-1])


class _Bound(logging.Filter):
    """Turns a record with an exception raised through Hypercorn into one bounded line."""

    def __init__(self, *, any_exception: bool) -> None:
        super().__init__()
        self._any_exception = any_exception
        """On Hypercorn's own error log every exception counts, whatever it passed through."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False (and a bounded line instead) for such a record; True for any other."""
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None or not (self._any_exception or _through_hypercorn(exc)):
            return True
        if isinstance(exc, asyncio.CancelledError) or _cancelled_group(exc):
            refused(f"connection cut while stopping ({summary(exc)})", level=logging.DEBUG)
        elif record.name == LOGGER_NAME:
            refused(f"request failed: {summary(exc)}")
        else:
            connection_failed(exc)
        return False


def _cancelled_group(exc: BaseException) -> bool:
    return isinstance(exc, BaseExceptionGroup) and all(
        isinstance(e, asyncio.CancelledError) for e in exc.exceptions
    )


_ERRORLOG_FILTER: Final = _Bound(any_exception=True)
_ASYNCIO_FILTER: Final = _Bound(any_exception=False)


def bounded_errorlog() -> logging.Logger:
    """The logger for Hypercorn's `config.errorlog`, its records and the `asyncio` logger's
    Hypercorn connection errors bounded as above (the filters are added once per process)."""
    for logger, bound in (
        (log, _ERRORLOG_FILTER),
        (logging.getLogger("asyncio"), _ASYNCIO_FILTER),
    ):
        if bound not in logger.filters:
            logger.addFilter(bound)
    return log
