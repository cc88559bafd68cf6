"""structlog on stdout, with stdlib `logging` records rendered the same way."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import TextIO

import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, Processor, WrappedLogger

from ._stdout import stream_handler

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
    handler.
    """
    out = sys.stdout if stream is None else stream
    as_json = not _is_tty(out) if json is None else json
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
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
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    return handler


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
