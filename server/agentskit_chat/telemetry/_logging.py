"""structlog on stdout, with stdlib `logging` records rendered the same way."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from json import JSONEncoder
from typing import Any, TextIO

import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, Processor, WrappedLogger

from ._stdout import line_writer, stream_handler

_HANDLER_NAME = "agentskit_chat"


def configure_logging(
    level: int | str = logging.INFO,
    *,
    stream: TextIO | None = None,
    json: bool | None = None,
    fields: Mapping[str, str | int] | None = None,
) -> logging.Handler:
    """Send structlog events and stdlib log records to `stream` (stdout) in one format.

    JSON lines with `timestamp`, `level`, `logger` and `event`, or a readable console
    format when the stream is a terminal and `json` is not forced. Tracebacks never show
    local variables (they may hold content). Lines are written by the logging thread
    itself, without ever blocking on a stalled reader: see NonBlockingHandler, which holds
    a bounded backlog and counts what it drops. Calling it again replaces (and closes) the
    handler it installed before. `fields` are added to every line (a worker process adds its
    index and pid, so interleaved lines of several workers can be told apart). Returns that
    handler. The `turn` line takes a shorter way to the same handler (see log_direct).
    """
    out = sys.stdout if stream is None else stream
    as_json = not _is_tty(out) if json is None else json
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        stamp,
    ]
    if fields:
        shared.append(_add_fields(dict(fields)))
    renderer: Processor = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(
            colors=_is_tty(out), exception_formatter=structlog.dev.plain_traceback
        )
    )
    final: list[Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if as_json:
        final.append(
            structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False))
        )
    handler = stream_handler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(foreign_pre_chain=shared, processors=[*final, renderer])
    )
    before_formatter: list[Processor] = [
        *shared,
        structlog.stdlib.PositionalArgumentsFormatter(),
        structlog.processors.StackInfoRenderer(),
    ]
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(level)
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *before_formatter,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    global _direct  # What the latest configuration installed.
    write = line_writer(handler)
    _direct = (
        None
        if write is None
        else _Direct(
            handler,
            write,
            [
                *(IsoUtcStamp() if step is stamp else step for step in before_formatter),
                *final[1:],
                _json_line if as_json else renderer,
            ],
        )
    )
    return handler


def log_direct(logger: logging.Logger, level: int, event: str, fields: dict[str, Any]) -> bool:
    """Write one structlog event the way `structlog.get_logger(logger.name).log(level, event,
    **fields)` would, without building a stdlib LogRecord and formatting it again: the same
    processors run in the same order on the same event dict (the timestamp and the JSON
    rendering in a quicker form that writes the same text: IsoUtcStamp, one JSON encoder made
    once), and the line goes to the handler configure_logging installed, under its lock.
    Done only while that handler is where the record would go and nothing else would see it
    (no other handler or filter on the way, the logger not disabled); otherwise returns False
    and leaves `fields` untouched, and the caller logs the ordinary way. Takes `fields` as the
    event dict (the caller's to give).
    """
    direct = _direct
    return direct is not None and direct.log(logger, level, event, fields)


_direct: _Direct | None = None


class _Direct:
    __slots__ = ("_chain", "_handler", "_methods", "_write")

    def __init__(
        self, handler: logging.Handler, write: Callable[[str], None], chain: Sequence[Processor]
    ) -> None:
        self._handler = handler
        self._write = write
        self._chain = tuple(chain)
        self._methods: dict[int, str] = {}

    def log(self, logger: logging.Logger, level: int, event: str, fields: dict[str, Any]) -> bool:
        if not self._only_handler(logger, level):
            return False
        method = self._methods.get(level)
        if method is None:  # structlog's method name for the level: "info", "warning"
            method = self._methods[level] = logging.getLevelName(level).lower()
        fields["event"] = event
        line: Any = fields
        for processor in self._chain:
            line = processor(logger, method, line)
        self._write(line)
        return True

    def _only_handler(self, logger: logging.Logger, level: int) -> bool:
        """Whether a record of `logger` at `level` would reach this handler and no other."""
        handler = self._handler
        if (
            level < handler.level
            or handler.filters
            or logger.disabled
            or logger.filters
            or not logger.isEnabledFor(level)
        ):
            return False
        node = logger
        while node.parent is not None:
            if node.handlers or not node.propagate:
                return False
            node = node.parent
        handlers = node.handlers
        return len(handlers) == 1 and handlers[0] is handler


class IsoUtcStamp:
    """The `timestamp` TimeStamper(fmt="iso", utc=True) adds (the same clock, the same text),
    with the date and time of day formatted once a second rather than on every line."""

    __slots__ = ("_second",)

    def __init__(self) -> None:
        self._second: tuple[int, str] = (-1, "")

    def __call__(self, _logger: WrappedLogger, _method: str, event: EventDict) -> EventDict:
        event["timestamp"] = self.text(time.time_ns())
        return event

    def text(self, nanoseconds: int) -> str:
        """`datetime.now(timezone.utc).isoformat()` at `nanoseconds`, "Z" for "+00:00"."""
        second, micro = divmod(nanoseconds // 1000, 1_000_000)  # datetime rounds down too
        cached, prefix = self._second
        if cached != second:
            prefix = datetime.fromtimestamp(second, UTC).isoformat()[:19]
            self._second = (second, prefix)
        return f"{prefix}.{micro:06d}Z" if micro else f"{prefix}Z"  # isoformat drops .000000


def _structlog_value(value: Any) -> Any:
    """JSONRenderer's fallback for a value JSON has no type for."""
    try:
        return value.__structlog__()
    except AttributeError:
        return repr(value)


_JSON = JSONEncoder(default=_structlog_value)


def _json_line(_logger: WrappedLogger, _method: str, event: EventDict) -> str:
    """What JSONRenderer() renders, with one encoder made once rather than one per line."""
    return _JSON.encode(event)


def _add_fields(fields: dict[str, str | int]) -> Processor:
    def add(_logger: WrappedLogger, _method: str, event: EventDict) -> EventDict:
        for key, value in fields.items():
            event.setdefault(key, value)
        return event

    return add


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
