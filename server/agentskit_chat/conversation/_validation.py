"""Semantic validation of a definition draft; every problem becomes one Diagnostic."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ._definition import ConversationSpec, Route
from ._errors import Diagnostic, ErrorCode
from ._matchers import CommandMatcher, ExactMatcher, HandlerMatcher, Matcher, PatternMatcher
from ._responses import RESULT_FIELD, CallableResponse, Response, TemplateResponse, ToolResponse
from ._statechart import chart_issues
from ._template import CONTEXT_FIELDS
from ._types import ROUTE_KINDS

ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


class MissingMatcher(Matcher):
    """Placeholder for a route whose matcher could not be read; already diagnosed."""


class MissingResponse(Response):
    """Placeholder for a route whose response could not be read; already diagnosed."""


@dataclass(frozen=True, slots=True)
class Draft:
    """Everything a definition declares, before validation."""

    id: str
    revision: Any
    model: Any
    conversation: ConversationSpec


def valid_id(value: str) -> bool:
    """Whether `value` is a well-formed definition or route id."""
    return ID_PATTERN.fullmatch(value) is not None


def validate(draft: Draft) -> Iterator[tuple[ErrorCode, str, str]]:
    """Yield (code, path, message) for every semantic problem of `draft`."""
    if not valid_id(draft.id):
        yield ErrorCode.INVALID_ID, "id", f"id must match {ID_PATTERN.pattern}"
    revision = draft.revision
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
        yield ErrorCode.INVALID_REVISION, "revision", "revision must be a positive integer"
    yield from _model_issues(draft.model)
    yield from _conversation_issues(draft.conversation)


def _model_issues(model: Any) -> Iterator[tuple[ErrorCode, str, str]]:
    if not isinstance(model, Mapping):
        yield ErrorCode.INVALID_MODEL, "model", "model must be a mapping of adapter settings"
        return
    adapter = model.get("adapter")
    if not isinstance(adapter, str) or not adapter.strip():
        yield ErrorCode.INVALID_MODEL, "model.adapter", "model.adapter must name an adapter"


def _conversation_issues(spec: ConversationSpec) -> Iterator[tuple[ErrorCode, str, str]]:
    transitions = {name: state.on for name, state in spec.states.items()}
    for issue in chart_issues(spec.initial, transitions):
        yield ErrorCode(issue.code), f"conversation.{issue.path}", issue.message
    for name, state in spec.states.items():
        seen: set[str] = set()
        for index, action in enumerate(state.actions):
            path = f"conversation.states.{name}.actions[{index}]"
            if not action.strip():
                yield ErrorCode.EMPTY_ACTION, path, "action names must not be empty"
            elif action in seen:
                yield ErrorCode.DUPLICATE_ACTION, path, f"action {action!r} is listed twice"
            seen.add(action)
    declared_events = {event for on in transitions.values() for event in on}
    route_ids: set[str] = set()
    for index, route in enumerate(spec.routes):
        path = f"conversation.routes[{index}]"
        yield from _route_issues(route, path, spec, declared_events, route_ids)
        route_ids.add(route.id)


def _route_issues(
    route: Route,
    path: str,
    spec: ConversationSpec,
    declared_events: set[str],
    earlier_ids: set[str],
) -> Iterator[tuple[ErrorCode, str, str]]:
    if not route.id.strip():
        yield ErrorCode.EMPTY_ROUTE_ID, f"{path}.id", "route ids must not be empty"
    elif route.id in earlier_ids:
        yield ErrorCode.DUPLICATE_ROUTE_ID, f"{path}.id", f"route id {route.id!r} is used twice"
    elif not valid_id(route.id):
        yield ErrorCode.INVALID_ID, f"{path}.id", f"route id must match {ID_PATTERN.pattern}"
    if not route.event.strip():
        yield ErrorCode.EMPTY_EVENT, f"{path}.event", "route events must not be empty"
    elif route.event not in declared_events:
        yield (
            ErrorCode.UNDECLARED_EVENT,
            f"{path}.event",
            f"event {route.event!r} is not declared by any state, so the route can never run",
        )
    if route.states is not None:
        if not route.states:
            yield (
                ErrorCode.EMPTY_ROUTE_STATES,
                f"{path}.states",
                "a state restriction lists no state",
            )
        for j, state in enumerate(route.states):
            if state not in spec.states:
                yield (
                    ErrorCode.UNKNOWN_ROUTE_STATE,
                    f"{path}.states[{j}]",
                    f"state {state!r} is not declared",
                )
    if route.kind not in ROUTE_KINDS:
        yield (
            ErrorCode.INVALID_KIND,
            f"{path}.kind",
            "kind must be deterministic, repaired or fallback",
        )
    yield from _matcher_issues(route.matcher, path)
    yield from _response_issues(route, path)


def _matcher_issues(matcher: Matcher, path: str) -> Iterator[tuple[ErrorCode, str, str]]:
    if isinstance(matcher, CommandMatcher) and not matcher.command.strip():
        yield ErrorCode.EMPTY_COMMAND, f"{path}.command", "commands must not be empty"
    elif isinstance(matcher, ExactMatcher) and not matcher.normalized:
        yield ErrorCode.EMPTY_EXACT, f"{path}.exact", "exact text must not be empty"
    elif isinstance(matcher, PatternMatcher):
        if not matcher.pattern:
            yield ErrorCode.INVALID_PATTERN, f"{path}.pattern", "patterns must not be empty"
        elif matcher.error is not None:
            yield ErrorCode.INVALID_PATTERN, f"{path}.pattern", f"invalid pattern: {matcher.error}"
    elif isinstance(matcher, HandlerMatcher) and not callable(matcher.handler):
        yield ErrorCode.INVALID_CALLABLE, f"{path}.handler", "handler must be callable"


def _response_issues(route: Route, path: str) -> Iterator[tuple[ErrorCode, str, str]]:
    response = route.response
    if isinstance(response, CallableResponse):
        if not callable(response.function):
            yield ErrorCode.INVALID_CALLABLE, f"{path}.response", "response must be callable"
        return
    if isinstance(response, ToolResponse):
        for name, argument in response.arguments.items():
            where = f"{path}.tool.arguments.{name}"
            yield from _template_issues(route.matcher, argument, where, frozenset())
        yield from _template_issues(
            route.matcher, response.template, f"{path}.response", frozenset({RESULT_FIELD})
        )
    elif isinstance(response, TemplateResponse):
        yield from _template_issues(route.matcher, response, f"{path}.response", frozenset())


def _template_issues(
    matcher: Matcher, response: TemplateResponse, path: str, extra: frozenset[str]
) -> Iterator[tuple[ErrorCode, str, str]]:
    """A template's syntax, and fields that neither the matcher's groups, the context nor
    `extra` provide."""
    if response.template is None:
        yield ErrorCode.INVALID_TEMPLATE, path, f"invalid template: {response.error}"
        return
    if isinstance(matcher, HandlerMatcher | MissingMatcher):
        return  # Handler groups are known only at run time.
    if isinstance(matcher, PatternMatcher) and (matcher.error is not None or not matcher.pattern):
        return
    groups = matcher.group_names if isinstance(matcher, PatternMatcher) else frozenset()
    for name in sorted(response.template.fields - CONTEXT_FIELDS - groups - extra):
        also = " nor the tool's {result}" if extra else ""
        yield (
            ErrorCode.UNKNOWN_TEMPLATE_FIELD,
            path,
            f"template field {{{name}}} is neither a pattern group nor message_id/session_id{also}",
        )


def diagnostics_for(
    draft: Draft, file: str, suppressed: frozenset[str] = frozenset()
) -> list[Diagnostic]:
    """Validate `draft`, skipping paths at or below any already-reported structural failure."""
    found: list[Diagnostic] = []
    for code, path, message in validate(draft):
        if not _is_suppressed(path, suppressed):
            found.append(Diagnostic(code, file, path, message))
    return found


def _is_suppressed(path: str, suppressed: frozenset[str]) -> bool:
    return any(path == s or path.startswith((s + ".", s + "[")) for s in suppressed)
