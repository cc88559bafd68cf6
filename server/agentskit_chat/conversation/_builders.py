"""Route builders for chats defined in code, mirroring the seeds' `commandRoute`."""

from __future__ import annotations

from collections.abc import Sequence

from ._definition import Route
from ._matchers import CommandMatcher, ExactMatcher, HandlerMatcher, Matcher, PatternMatcher
from ._responses import ResponseLike, to_response
from ._types import HandlerFn, to_kind


def command_route(
    *,
    id: str,
    command: str,
    event: str,
    response: ResponseLike,
    states: Sequence[str] | None = None,
    kind: str = "deterministic",
) -> Route:
    """A route matching the input exactly."""
    return _route(id, event, CommandMatcher(command), response, states, kind)


def exact_route(
    *,
    id: str,
    text: str,
    event: str,
    response: ResponseLike,
    states: Sequence[str] | None = None,
    kind: str = "deterministic",
) -> Route:
    """A route matching input equal to `text` after NFKC, trimming, collapsing and case-folding."""
    return _route(id, event, ExactMatcher(text), response, states, kind)


def pattern_route(
    *,
    id: str,
    pattern: str,
    event: str,
    response: ResponseLike,
    states: Sequence[str] | None = None,
    kind: str = "deterministic",
) -> Route:
    """A route whose RE2 pattern must match the whole input; named groups feed the response."""
    return _route(id, event, PatternMatcher(pattern), response, states, kind)


def handler_route(
    *,
    id: str,
    handler: HandlerFn,
    event: str,
    response: ResponseLike,
    states: Sequence[str] | None = None,
    kind: str = "deterministic",
) -> Route:
    """A route decided by `handler(input, context)`: truthy matches, a mapping supplies groups."""
    return _route(id, event, HandlerMatcher(handler), response, states, kind)


def _route(
    id: str,
    event: str,
    matcher: Matcher,
    response: ResponseLike,
    states: Sequence[str] | None,
    kind: str,
) -> Route:
    return Route(
        id=id,
        event=event,
        matcher=matcher,
        response=to_response(response),
        states=None if states is None else tuple(states),
        kind=to_kind(kind),
    )
