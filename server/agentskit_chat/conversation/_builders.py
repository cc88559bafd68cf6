"""The Python API for chats defined in code, mirroring `defineChat` and `commandRoute`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, cast

from ._build import build_definition
from ._definition import DEFAULT_MODEL, ChatDefinition, ConversationSpec, Route, StateSpec
from ._matchers import CommandMatcher, ExactMatcher, HandlerMatcher, Matcher, PatternMatcher
from ._responses import CallableResponse, Response, TemplateResponse
from ._types import HandlerFn, ResponseFn, TurnKind
from ._validation import Draft

ResponseLike = str | ResponseFn


def define_chat(
    *,
    id: str,
    conversation: Mapping[str, Any],
    revision: int = 1,
    model: Mapping[str, Any] | None = None,
    description: str = "",
    source: str = "<code>",
) -> ChatDefinition:
    """Validate and compile a chat; raises ConfigError listing every problem.

    `conversation` holds `initial`, `states` (name → `{"on": {event: target}, "actions": [...]}`)
    and `routes` (built with `command_route`, `exact_route`, `pattern_route`, `handler_route`).
    """
    states = {
        str(name): StateSpec(
            on=MappingProxyType(dict(state.get("on", {}))),
            actions=tuple(state.get("actions", ())),
        )
        for name, state in dict(conversation.get("states", {})).items()
    }
    spec = ConversationSpec(
        initial=str(conversation.get("initial", "")),
        states=MappingProxyType(states),
        routes=tuple(conversation.get("routes", ())),
    )
    draft = Draft(
        id=id, revision=revision, model=DEFAULT_MODEL if model is None else model, conversation=spec
    )
    return build_definition(draft, file=source, description=description)


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


def to_response(response: ResponseLike) -> Response:
    """A template for text, a callable response for functions."""
    if isinstance(response, str):
        return TemplateResponse(response)
    return CallableResponse(response)


def to_kind(kind: str) -> TurnKind:
    """The TurnKind named `kind`; an unknown name is kept for validation to report."""
    try:
        return TurnKind(kind)
    except ValueError:
        return cast(TurnKind, kind)


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
