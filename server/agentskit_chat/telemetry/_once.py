"""Exporter trouble is logged once, not once per export attempt or per turn."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

log = logging.getLogger("agentskit_chat.telemetry")


class LogOnce(logging.Filter):
    """Lets each distinct (logger, message template) through once and counts the repeats.

    A collector that is down makes the exporters log on every attempt; with this filter on
    their loggers the first record of each kind is kept and the rest only counted.
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._repeats: dict[tuple[str, str], int] = {}
        self._loggers: list[logging.Logger] = []

    def filter(self, record: logging.LogRecord) -> bool:
        """True the first time a (logger, template) pair is seen."""
        key = (record.name, str(record.msg))
        with self._lock:
            repeats = self._repeats.get(key)
            self._repeats[key] = 0 if repeats is None else repeats + 1
        return repeats is None

    def suppressed(self) -> dict[tuple[str, str], int]:
        """How many records of each (logger, template) were held back."""
        with self._lock:
            return {key: count for key, count in self._repeats.items() if count}

    def attach(self, loggers: Iterable[logging.Logger]) -> None:
        """Filter these loggers until `detach`."""
        for logger in loggers:
            if self not in logger.filters:
                logger.addFilter(self)
                self._loggers.append(logger)

    def detach(self) -> None:
        """Stop filtering, and log how many repeats were held back, once per kind."""
        for logger in self._loggers:
            logger.removeFilter(self)
        self._loggers.clear()
        for (name, template), count in sorted(self.suppressed().items()):
            log.info("%d more log records like %r from %s were suppressed", count, template, name)


def otel_loggers() -> list[logging.Logger]:
    """The `opentelemetry` logger and every logger below it that exists so far."""
    names = [name for name in logging.root.manager.loggerDict if _is_otel(name)]
    return [logging.getLogger(name) for name in dict.fromkeys(("opentelemetry", *names))]


def _is_otel(name: str) -> bool:
    return name == "opentelemetry" or name.startswith("opentelemetry.")
