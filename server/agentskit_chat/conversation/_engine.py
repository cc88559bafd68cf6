"""Resolve one dispatch: prune, rebuild, replay or route, or delegate to the model.

This is DESIGN §2 rules 1-10 as one pure function of (definition, state, messages). It
returns a new ConversationState inside the outcome and never mutates its inputs; the host
decides when to commit it.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import replace
from itertools import compress, repeat
from operator import attrgetter
from types import MappingProxyType
from typing import Any, Final, TypeVar

from ._decisions import ConversationState, Decision, HistoryKey, InputDigester
from ._definition import ChatDefinition, Route
from ._errors import AsyncCallbackError, InvalidHistoryError
from ._matchers import DeclarativeMatcher, HandlerMatcher, RouteInput, groups_of
from ._outcomes import Outcome, answer, delegate, fail, history_key
from ._responses import RouteTools, TemplateResponse, ToolResponse
from ._statechart import Accepted, StatechartInstance, create_instance, transition
from ._types import Message, Role, RouteContext

DEFAULT_CALLBACK_TIMEOUT: Final = 5.0

T = TypeVar("T")


def initial_state(definition: ChatDefinition, session_id: str) -> ConversationState:
    """The state of a new session: the chart's initial state and no decisions."""
    instance = create_instance(definition.compiled.chart, id=session_id)
    return ConversationState(instance=instance)


def check_history(messages: Sequence[Message]) -> list[Message]:
    """The user messages of `messages`; raises InvalidHistoryError on malformed entries."""
    try:
        ids = list(map(_ID, messages))
        roles = list(map(_ROLE, messages))
        unique = set(ids)
        valid = (
            len(unique) == len(ids)
            and "" not in unique
            and all(map(isinstance, ids, repeat(str)))
            and _ROLES.issuperset(roles)
            and all(map(isinstance, map(_CONTENT, messages), repeat(str)))
        )
    except TypeError:  # an unhashable id or role
        valid = False
    if not valid:
        raise InvalidHistoryError(_first_problem(messages))
    return list(compress(messages, map(Role.USER.__eq__, roles)))


def _first_problem(messages: Sequence[Message]) -> str:
    """Describe the first malformed message, by position only (never by content)."""
    seen: set[str] = set()
    for index, message in enumerate(messages):
        if not isinstance(message.id, str) or not message.id:
            return f"message {index} has an empty or non-text id"
        if message.id in seen:
            return f"message {index} repeats an earlier message id"
        if not isinstance(message.role, str) or message.role not in _ROLES:
            return f"message {index} has an unknown role"
        if not isinstance(message.content, str):
            return f"message {index} has non-text content"
        seen.add(message.id)
    return "the history is malformed"


_ROLES: Final = frozenset(Role)
_ID: Final = attrgetter("id")
_ROLE: Final = attrgetter("role")
_CONTENT: Final = attrgetter("content")


async def resolve(
    definition: ChatDefinition,
    state: ConversationState,
    messages: Sequence[Message],
    *,
    digester: InputDigester,
    callback_timeout: float = DEFAULT_CALLBACK_TIMEOUT,
    allow_async: bool = True,
    at: float | None = None,
    continuation: bool = False,
    tools: RouteTools | None = None,
) -> Outcome:
    """Resolve the last user message of `messages` against `state`.

    `tools` runs the server tools of tool routes (a route naming a tool fails without it).

    With `continuation`, `messages` end with tool results of the model's answer to the last
    user message: that answer goes on, so the history is reconciled as usual and then
    delegated to the model without any route running.
    """
    users = check_history(messages)
    session_id = state.instance.id
    earlier = users[:-1]
    basis = history_key(earlier)
    instance, kept = _rebuild(definition, state, earlier, basis, digester)
    if not users or continuation:
        return delegate(
            definition, instance, kept, users, messages, users[-1].id if users else None
        )
    last = users[-1]
    digest = digester.digest(last.content)
    prior = state.decisions.get(last.id)
    if prior is not None and prior.input_digest == digest and prior.from_state == instance.state:
        replay = _replay(definition, instance, prior, last, at)
        if replay is not None:
            accepted, recorded = replay
            return answer(
                definition, instance, accepted, kept, basis, users, recorded, replayed=True
            )
    route_input = RouteInput(last.content)
    context = RouteContext(session_id=session_id, message_id=last.id)
    for route in definition.compiled.routes_by_state[instance.state]:
        try:
            groups = await _match(route, route_input, context, callback_timeout, allow_async)
            if groups is None:
                continue
            if groups:
                context = RouteContext(session_id, last.id, MappingProxyType(dict(groups)))
            response = await _respond(
                route, last.content, context, callback_timeout, allow_async, tools
            )
        except AsyncCallbackError:
            raise
        except Exception as exc:
            return fail(definition, state, route, last.id, exc)
        moved = transition(definition.compiled.chart, instance, route.event, at=at)
        if not isinstance(moved, Accepted):  # Eligibility tables make this unreachable.
            return fail(definition, state, route, last.id, RuntimeError())
        decision = Decision(
            message_id=last.id,
            input_digest=digest,
            route_id=route.id,
            kind=route.kind,
            event=route.event,
            from_state=moved.from_state,
            to_state=moved.to_state,
            response=response,
            derived=route.derives_response,
        )
        return answer(definition, instance, moved, kept, basis, users, decision, replayed=False)
    return delegate(definition, instance, kept, users, messages, last.id)


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Drive a coroutine that never suspends to completion without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coroutine.close()
    raise AsyncCallbackError("the dispatch suspended; await it inside an event loop instead")


def _replay(
    definition: ChatDefinition,
    instance: StatechartInstance,
    prior: Decision,
    last: Message,
    at: float | None,
) -> tuple[Accepted, Decision] | None:
    """The transition and decision of a replay; None when the decision no longer applies."""
    moved = transition(definition.compiled.chart, instance, prior.event, at=at)
    if not isinstance(moved, Accepted) or moved.to_state != prior.to_state:
        return None
    if not prior.derived or prior.response:
        return moved, prior  # Only a decoded record lacks a derived response.
    route = definition.compiled.routes_by_id.get(prior.route_id)
    if route is None or not route.derives_response:
        return None
    session_id = instance.id
    context = RouteContext(session_id=session_id, message_id=last.id)
    if not isinstance(route.matcher, DeclarativeMatcher):
        return None
    groups = route.matcher.match(RouteInput(last.content), context)
    if groups is None:
        return None
    if groups:
        context = RouteContext(session_id, last.id, MappingProxyType(dict(groups)))
    response = route.response.produce(last.content, context)
    if not isinstance(response, str):
        return None
    return moved, (prior if response == prior.response else replace(prior, response=response))


def _rebuild(
    definition: ChatDefinition,
    state: ConversationState,
    earlier: Sequence[Message],
    basis: HistoryKey,
    digester: InputDigester,
) -> tuple[StatechartInstance, dict[str, Decision]]:
    """Prune and replay: the position after the retained decisions of `earlier`.

    When a checkpoint of the previous dispatch covers exactly these messages with the same
    contents, its position is reused and nothing is replayed.
    """
    for checkpoint in state.checkpoints:
        if checkpoint.key == basis:
            return checkpoint.instance, dict(checkpoint.decisions)
    decisions = state.decisions
    chart = definition.compiled.chart
    instance = create_instance(chart, id=state.instance.id, at=state.instance.updated_at)
    kept = {}
    for message in earlier:
        decision = decisions.get(message.id)
        if decision is None or decision.from_state != instance.state:
            continue
        if decision.input_digest != digester.digest(message.content):
            continue  # The input was edited: the decision is stale.
        moved = transition(chart, instance, decision.event)
        if isinstance(moved, Accepted) and moved.to_state == decision.to_state:
            instance = moved.instance
            kept[message.id] = decision
    return instance, kept


async def _match(
    route: Route, route_input: RouteInput, context: RouteContext, timeout: float, allow_async: bool
) -> Mapping[str, str] | None:
    matcher = route.matcher
    if isinstance(matcher, DeclarativeMatcher):
        return matcher.match(route_input, context)
    if isinstance(matcher, HandlerMatcher):
        result = await _call(matcher.handler, route_input.text, context, timeout, allow_async)
        return groups_of(result)
    return None  # Placeholder matchers never reach a compiled definition.


async def _respond(
    route: Route,
    text: str,
    context: RouteContext,
    timeout: float,
    allow_async: bool,
    tools: RouteTools | None,
) -> str:
    response = route.response
    if isinstance(response, TemplateResponse):
        return response.produce(text, context)
    if isinstance(response, ToolResponse):
        if not allow_async:
            raise AsyncCallbackError("a tool route needs `await session.dispatch()`")
        return await response.run(text, context, tools)  # The tool's own timeout bounds it.
    result = await _call(response.produce, text, context, timeout, allow_async)
    if not isinstance(result, str):
        raise TypeError("a route response must be a string")
    return result


async def _call(
    function: Callable[[str, RouteContext], Any | Awaitable[Any]],
    text: str,
    context: RouteContext,
    timeout: float,
    allow_async: bool,
) -> Any:
    """Run a route callback within `timeout`; a sync callback that overruns fails too."""
    started = time.perf_counter()
    result = function(text, context)
    if inspect.isawaitable(result):
        if not allow_async:
            if inspect.iscoroutine(result):
                result.close()
            raise AsyncCallbackError("an async route callback needs `await session.dispatch()`")
        return await asyncio.wait_for(result, timeout)
    if time.perf_counter() - started > timeout:
        raise TimeoutError("route callback overran its time budget")
    return result
