"""What the fake model answers: scripted replies and scripted failures."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise
from typing import Final, TypeAlias

DEFAULT_TEXT: Final = (
    "This reply comes from the fake model server: it streams a fixed sentence in several "
    "chunks, the way a real model would."
)


def split_text(text: str, parts: int) -> tuple[str, ...]:
    """`text` in `parts` non-empty pieces: whole words while there are enough of them."""
    if not 1 <= parts <= len(text):
        raise ValueError(f"cannot split {len(text)} characters into {parts} chunks")
    words = text.split(" ")
    if parts <= len(words):
        bounds = [len(words) * i // parts for i in range(parts + 1)]
        groups = [" ".join(words[a:b]) for a, b in pairwise(bounds)]
        return (*(g + " " for g in groups[:-1]), groups[-1])
    bounds = [len(text) * i // parts for i in range(parts + 1)]
    return tuple(text[a:b] for a, b in pairwise(bounds))


DEFAULT_CHUNKS: Final = split_text(DEFAULT_TEXT, 4)


class Ending(StrEnum):
    """How a streamed reply ends after its text chunks."""

    DONE = "done"
    """The finish reason, the usage (when asked for) and `data: [DONE]`: a complete stream."""
    TRUNCATE = "truncate"
    """The response body ends cleanly, without finish reason or `[DONE]`."""
    DROP = "drop"
    """The connection is cut in the middle of the response body."""
    MALFORMED = "malformed"
    """An event whose data is not JSON, then the body ends."""
    STALL = "stall"
    """Nothing more is sent; the connection stays open until the client leaves."""
    HOLD = "hold"
    """A complete stream through `data: [DONE]`, but the body never ends: the connection stays
    open until the client leaves."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A streamed answer: `chunks` one event each, `delay` seconds before each chunk."""

    chunks: tuple[str, ...] = DEFAULT_CHUNKS
    delay: float = 0.0
    usage: tuple[int, int] | None = None
    """(prompt tokens, completion tokens); None counts the words sent and the chunks."""
    finish_reason: str = "stop"
    ending: Ending = Ending.DONE
    pause_after: int | None = None
    """After this many text chunks, wait until the server's `resume()` is called."""

    @property
    def text(self) -> str:
        """The whole answer."""
        return "".join(self.chunks)


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """A plain, complete HTTP response instead of a stream, such as an error status."""

    status: int
    body: str = ""
    content_type: str = "application/json"
    retry_after: str | None = None
    """The Retry-After header, sent when set."""


@dataclass(frozen=True, slots=True)
class Hangup:
    """Close the connection right after reading the request, without any answer."""


@dataclass(frozen=True, slots=True)
class Stall:
    """Answer nothing and keep the connection open until the client leaves."""


Script: TypeAlias = Reply | HttpResponse | Hangup | Stall
