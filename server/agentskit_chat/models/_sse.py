"""Server-sent events, split incrementally as the bytes of a response arrive."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MAX_EVENT_BYTES: Final = 1 << 20


class EventStreamError(ValueError):
    """The bytes are not a server-sent event stream (bad UTF-8 or an oversized event)."""


class TruncatedEventError(EventStreamError):
    """The stream ended in the middle of an event: that event is discarded."""


@dataclass(frozen=True, slots=True)
class ServerEvent:
    """One dispatched event: its type (`message` unless named) and its data lines, joined."""

    event: str
    data: str


class EventStreamParser:
    """Feeds on response bytes and returns each event as soon as its blank line arrives.

    Lines end with LF or CRLF; comments (`:` lines) and the `id` and `retry` fields are
    ignored. An event without data lines is not dispatched, and neither is one the stream
    ends before its blank line.
    """

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._max = max_event_bytes
        self._rest = b""
        self._event = ""
        self._data: list[str] = []
        self._size = 0

    def feed(self, chunk: bytes) -> list[ServerEvent]:
        """The events completed by `chunk`."""
        lines = (self._rest + chunk).split(b"\n")
        self._rest = lines.pop()
        if len(self._rest) > self._max:
            raise EventStreamError("an event stream line is too long")
        events: list[ServerEvent] = []
        for line in lines:
            event = self._line(line[:-1] if line.endswith(b"\r") else line)
            if event is not None:
                events.append(event)
        return events

    def finish(self) -> None:
        """End of the stream: TruncatedEventError when it stopped in the middle of an event.

        The unfinished event is discarded, never dispatched.
        """
        cut = bool(self._rest or self._data or self._event)
        self._rest, self._data, self._event, self._size = b"", [], "", 0
        if cut:
            raise TruncatedEventError("the event stream ended in the middle of an event")

    def _line(self, raw: bytes) -> ServerEvent | None:
        if not raw:
            return self._dispatch()
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise EventStreamError("an event stream line is not UTF-8") from None
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._size += len(raw)
            if self._size > self._max:
                raise EventStreamError("an event stream event is too long")
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None

    def _dispatch(self) -> ServerEvent | None:
        data, event = self._data, self._event or "message"
        self._data, self._event, self._size = [], "", 0
        return ServerEvent(event, "\n".join(data)) if data else None
