"""The incremental server-sent event parser."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentskit_chat.models._sse import EventStreamError, EventStreamParser, ServerEvent

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


def feed_all(parser: EventStreamParser, pieces: list[bytes]) -> list[ServerEvent]:
    events = [event for piece in pieces for event in parser.feed(piece)]
    return events + parser.finish()


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


def test_a_last_event_without_its_blank_line_is_still_returned_at_the_end() -> None:
    parser = EventStreamParser()
    assert parser.feed(b"data: [DONE]") == []
    assert parser.finish() == [ServerEvent("message", "[DONE]")]


def test_oversized_lines_and_events_are_refused() -> None:
    with pytest.raises(EventStreamError):
        EventStreamParser(max_event_bytes=16).feed(b"data: " + b"x" * 32)
    parser = EventStreamParser(max_event_bytes=16)
    with pytest.raises(EventStreamError):
        parser.feed(b"data: 0123456789\ndata: 0123456789\n")


def test_bytes_that_are_not_utf8_are_refused() -> None:
    with pytest.raises(EventStreamError):
        EventStreamParser().feed(b"data: \xff\n\n")
