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


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call of a ToolCalls answer."""

    name: str
    arguments: str = "{}"
    """The arguments, JSON text: streamed in pieces."""
    id: str | None = None
    """The call id; None gives the call a fresh `call_fake_<n>`."""


@dataclass(frozen=True, slots=True)
class ToolCalls:
    """A streamed answer that calls tools, in the OpenAI shape.

    First the `text` chunks, if any; then for each call a first delta with its `index`,
    `id`, `type` and function `name` (arguments empty), and its arguments in up to `pieces`
    more deltas of that index. With `interleave` the calls take turns, delta by delta (all
    the first deltas, then every call's first piece, ...); without, one call after another.
    Then the finish reason (`tool_calls`), usage and `[DONE]`, as a Reply ends.

    With no `calls`, the answer calls each tool the request declares, with example
    arguments made from its `parameters` schema (of those named in `only`, when set): only
    the tool `tool_choice` names when it names one, only the first with
    `parallel_tool_calls: false`, and none when the request
    declares no tools. `delay`, `pause_after` and the request's `chunks_sent` count every
    delta after the first (the assistant role), text and tool deltas alike.
    """

    calls: tuple[Call, ...] = ()
    pieces: int = 3
    interleave: bool = True
    text: tuple[str, ...] = ()
    delay: float = 0.0
    usage: tuple[int, int] | None = None
    """(prompt tokens, completion tokens); None counts the words sent and the deltas."""
    finish_reason: str = "tool_calls"
    ending: Ending = Ending.DONE
    pause_after: int | None = None
    only: tuple[str, ...] = ()
    """Without `calls`: the names of the tools it calls, when the request offers them."""

    def __post_init__(self) -> None:
        if self.pieces < 1:
            raise ValueError("a tool call's arguments come in at least one piece")
        if not all(call.name for call in self.calls):
            raise ValueError("every scripted tool call needs a name")


Script: TypeAlias = Reply | ToolCalls | HttpResponse | Hangup | Stall
