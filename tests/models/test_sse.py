"""The incremental server-sent event parser."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentskit_chat.models._sse import (
    EventStreamError,
    EventStreamParser,
    ServerEvent,
    TruncatedEventError,
)

STREAM = (
    b": a comment\n"
    b"data: first\n\n"
    b"event: error\r\n"
    b'data: {"a":\r\n'
    b"data: 1}\r\n\r\n"
    b"id: 7\n"
    b"retry: 10\n\n"
    b"data:no space \xc3\xa9\n\n"
    b"data: [DONE]\n\n"
)
EVENTS = [
    ServerEvent("message", "first"),
    ServerEvent("error", '{"a":\n1}'),
    ServerEvent("message", "no space \u00e9"),
    ServerEvent("message", "[DONE]"),
]


CLEAN_ENDS = frozenset(
    {
        0,
        STREAM.index(b"data: first"),  # After the comment line.
        STREAM.index(b"event: error"),
        STREAM.index(b"id: 7"),
        STREAM.index(b"retry: 10"),  # After the id line: nothing is pending.
        STREAM.index(b"\n\ndata:no space") + 1,  # After the retry line, too.
        STREAM.index(b"data:no space"),
        STREAM.index(b"data: [DONE]"),
        len(STREAM),
    }
)
"""Where STREAM can end without cutting an event."""


def feed_all(parser: EventStreamParser, pieces: list[bytes]) -> list[ServerEvent]:
    events = [event for piece in pieces for event in parser.feed(piece)]
    parser.finish()
    return events


def test_events_are_split_on_blank_lines_with_lf_or_crlf() -> None:
    assert feed_all(EventStreamParser(), [STREAM]) == EVENTS


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_split_of_the_bytes_gives_the_same_events(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(STREAM)]
    pieces = [STREAM[a:b] for a, b in pairwise(bounds)]
    assert feed_all(EventStreamParser(), pieces) == EVENTS


def test_an_event_is_returned_as_soon_as_its_blank_line_arrives() -> None:
    parser = EventStreamParser()
    assert parser.feed(b"data: one\n") == []
    assert parser.feed(b"\ndata: tw") == [ServerEvent("message", "one")]
    assert parser.feed(b"o\n\n") == [ServerEvent("message", "two")]


@pytest.mark.parametrize(
    "tail",
    [
        b"data: [DONE]",
        b"data: [DONE]\n",
        b"data: [DONE]\r\n\r",
        b'data: {"choices": [{"delta": {"content": "hi',
        b'data: {"a": 1}\n',
        b"event: error\n",
        b": keep-al",
    ],
)
def test_an_event_cut_before_its_blank_line_is_discarded_and_reported(tail: bytes) -> None:
    parser = EventStreamParser()
    assert parser.feed(b"data: one\n\n" + tail) == [ServerEvent("message", "one")]
    with pytest.raises(TruncatedEventError) as caught:
        parser.finish()
    assert isinstance(caught.value, EventStreamError)


@pytest.mark.parametrize("cut", range(len(STREAM) + 1))
def test_a_stream_cut_anywhere_gives_the_whole_events_and_reports_a_cut_event(cut: int) -> None:
    parser = EventStreamParser()
    events = parser.feed(STREAM[:cut])
    assert events == EVENTS[: len(events)]
    if cut in CLEAN_ENDS:
        parser.finish()
    else:
        with pytest.raises(TruncatedEventError):
            parser.finish()


def test_a_stream_ending_between_events_is_complete() -> None:
    parser = EventStreamParser()
    assert parser.feed(b"data: one\n\n: a comment\nid: 3\n") == [ServerEvent("message", "one")]
    parser.finish()


def test_oversized_lines_and_events_are_refused() -> None:
    with pytest.raises(EventStreamError):
        EventStreamParser(max_event_bytes=16).feed(b"data: " + b"x" * 32)
    parser = EventStreamParser(max_event_bytes=16)
    with pytest.raises(EventStreamError):
        parser.feed(b"data: 0123456789\ndata: 0123456789\n")


def test_bytes_that_are_not_utf8_are_refused() -> None:
    with pytest.raises(EventStreamError):
        EventStreamParser().feed(b"data: \xff\n\n")
