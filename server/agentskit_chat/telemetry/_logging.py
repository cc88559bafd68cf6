"""structlog on stdout, with stdlib `logging` records rendered the same way."""

from __future__ import annotations

import atexit
import logging
import queue
import sys
from logging.handlers import QueueHandler, QueueListener
from typing import TextIO

import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import Processor

_HANDLER_NAME = "agentskit_chat"
QUEUE_RECORDS = 10_000
"""Records waiting for the writer thread; beyond this, new records are dropped."""


class _Writer(QueueListener):
    """The writer thread; stopping waits for room in a full queue instead of failing."""

    def enqueue_sentinel(self) -> None:
        """Queue the stop marker behind the records still waiting."""
        self.queue.put(self._sentinel)  # type: ignore[attr-defined]


class _BackgroundHandler(QueueHandler):
    """Hands records to a writer thread; never waits, even when the output is stalled."""

    def __init__(self, records: queue.Queue[logging.LogRecord], listener: QueueListener) -> None:
        super().__init__(records)
        self.listener = listener
        self.dropped = 0
        self._closed = False

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        """The record as it is: the writer thread formats it (structlog keeps a dict in it)."""
        return record

    def enqueue(self, record: logging.LogRecord) -> None:
        """Queue the record, or count it as dropped when the writer is behind."""
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1

    def close(self) -> None:
        """Write what is queued, stop the writer, and say how much was dropped."""
        if self._closed:
            return
        self._closed = True
        self.listener.stop()
        for handler in self.listener.handlers:
            if self.dropped:
                handler.handle(
                    logging.makeLogRecord(
                        {
                            "name": "agentskit_chat.logging",
                            "levelno": logging.WARNING,
                            "levelname": "WARNING",
                            "msg": f"{self.dropped} log records were dropped: output was stalled",
                        }
                    )
                )
            handler.flush()
        super().close()


def configure_logging(
    level: int | str = logging.INFO,
    *,
    stream: TextIO | None = None,
    json: bool | None = None,
    background: bool = False,
) -> logging.Handler:
    """Send structlog events and stdlib log records to `stream` (stdout) in one format.

    JSON lines with `timestamp`, `level`, `logger` and `event`, or a readable console
    format when the stream is a terminal and `json` is not forced. Tracebacks never show
    local variables (they may hold content). With `background`, a writer thread formats
    and writes, so a stalled output never blocks the caller: records beyond QUEUE_RECORDS
    are dropped and counted; closing the handler (at exit at the latest) writes the rest.
    Calling it again replaces the handler it installed before. Returns that handler.
    """
    out = sys.stdout if stream is None else stream
    as_json = not _is_tty(out) if json is None else json
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
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
    writer = logging.StreamHandler(out)
    writer.setFormatter(
        structlog.stdlib.ProcessorFormatter(foreign_pre_chain=shared, processors=[*final, renderer])
    )
    handler: logging.Handler = writer
    if background:
        records: queue.Queue[logging.LogRecord] = queue.Queue(QUEUE_RECORDS)
        listener = _Writer(records, writer)
        handler = _BackgroundHandler(records, listener)
        listener.start()
        atexit.register(handler.close)
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
        old.close()
        atexit.unregister(old.close)
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


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
