"""Small value types shared across the conversation core."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Final, TypeAlias, cast

EMPTY_GROUPS: Final[Mapping[str, str]] = MappingProxyType({})


class TurnKind(StrEnum):
    """Trace classification of a turn."""

    DETERMINISTIC = "deterministic"
    AGENTIC = "agentic"
    REPAIRED = "repaired"
    FALLBACK = "fallback"


ROUTE_KINDS: Final = frozenset({TurnKind.DETERMINISTIC, TurnKind.REPAIRED, TurnKind.FALLBACK})


def to_kind(kind: str) -> TurnKind:
    """The TurnKind named `kind`; an unknown name is passed through for validation to report."""
    try:
        return TurnKind(kind)
    except ValueError:
        return cast(TurnKind, kind)


class Role(StrEnum):
    """Author of a message in the retained history."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call of a tool the model asked for in an assistant message."""

    id: str
    name: str
    arguments: str = field(repr=False)
    """The arguments as JSON text, exactly as the model wrote them."""


@dataclass(frozen=True, slots=True)
class Message:
    """One retained message; the core reads its content only to match and digest it.

    An assistant message may carry the model's `tool_calls`; a tool message carries the
    result of the call `tool_call_id` as its content. Routes read user messages only.
    """

    id: str
    role: Role
    content: str = field(repr=False)
    tool_calls: tuple[ToolCall, ...] = field(default=(), repr=False)
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class RouteContext:
    """What route callbacks receive beside the input."""

    session_id: str
    message_id: str | None
    """Id of the user message being resolved; None only when no user message exists."""
    groups: Mapping[str, str] = field(default_factory=lambda: EMPTY_GROUPS, repr=False)
    """Named groups of a pattern match, or the mapping a handler matcher returned."""


@dataclass(frozen=True, slots=True)
class ConversationSnapshot:
    """The projection a renderer sees: current state, its allowed events and actions."""

    state: str
    events: tuple[str, ...]
    actions: tuple[str, ...]


MatchResult: TypeAlias = bool | Mapping[str, str] | None
HandlerFn: TypeAlias = Callable[[str, RouteContext], MatchResult | Awaitable[MatchResult]]
ResponseFn: TypeAlias = Callable[[str, RouteContext], str | Awaitable[str]]
