"""The definition model: frozen dataclasses from chat down to route."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ._matchers import DeclarativeMatcher, Matcher
from ._migration import Migration
from ._responses import Response, TemplateResponse
from ._server_tools import McpServerSpec, ServerToolSpec
from ._statechart import Statechart
from ._types import ConversationSnapshot, TurnKind

DEFAULT_MODEL: Mapping[str, Any] = MappingProxyType({"adapter": "offline"})


@dataclass(frozen=True, slots=True)
class StateSpec:
    """One state: its transitions (event → target, in declaration order) and its actions."""

    on: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    actions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Route:
    """A known input that fires an event; the machine, not the route, picks the target."""

    id: str
    event: str
    matcher: Matcher
    response: Response
    states: tuple[str, ...] | None = None
    """States the route is restricted to; None means any state that allows the event."""
    kind: TurnKind = TurnKind.DETERMINISTIC
    """Trace kind of a match: deterministic, repaired or fallback."""

    @property
    def derives_response(self) -> bool:
        """Whether the response follows from the input alone, without application code."""
        return isinstance(self.response, TemplateResponse) and isinstance(
            self.matcher, DeclarativeMatcher
        )


@dataclass(frozen=True, slots=True)
class ConversationSpec:
    """Initial state, states in declaration order, and routes in precedence order."""

    initial: str
    states: Mapping[str, StateSpec]
    routes: tuple[Route, ...] = ()


@dataclass(frozen=True, slots=True)
class CompiledConversation:
    """Lookup tables built once per definition and shared by all its sessions."""

    chart: Statechart
    routes_by_state: Mapping[str, tuple[Route, ...]]
    """Routes eligible in each state, in declaration order."""
    snapshots: Mapping[str, ConversationSnapshot]
    routes_by_id: Mapping[str, Route]


@dataclass(frozen=True, slots=True)
class ChatDefinition:
    """A validated, immutable chat definition; obtain one from `define_chat` or a loader."""

    id: str
    revision: int
    conversation: ConversationSpec
    compiled: CompiledConversation = field(repr=False, compare=False)
    model: Mapping[str, Any] = field(default_factory=lambda: DEFAULT_MODEL)
    """Adapter settings, opaque to the core."""
    description: str = ""
    source: str = "<code>"
    """File the definition was loaded from, or `<code>`."""
    approvals: frozenset[str] = frozenset()
    """Names of the tools whose calls wait for a person's approval before they run."""
    rollout: int | None = None
    """This revision's weight among its id's served revisions for new sessions; None when
    the file declares none (see `_revisions`)."""
    migrations: Mapping[int, Migration] = field(default_factory=lambda: MappingProxyType({}))
    """How sessions of older revisions move to this one, by the older revision."""
    mcp_servers: Mapping[str, McpServerSpec] = field(default_factory=lambda: MappingProxyType({}))
    """The MCP servers the definition declares, by name."""
    server_tools: Mapping[str, ServerToolSpec] = field(default_factory=lambda: MappingProxyType({}))
    """The tools the service runs itself on those servers, by name (a subset of the
    definition's tools; one with `approval: true` is in `approvals` too)."""
    document: str | None = field(default=None, repr=False, compare=False)
    """The file's content as canonical JSON text, which rebuilds this definition in another
    process (`definition_of_document`); None for a chat defined in code."""

    def snapshot(self, state: str) -> ConversationSnapshot:
        """The conversation snapshot of `state`."""
        return self.compiled.snapshots[state]


def compile_conversation(spec: ConversationSpec, chart: Statechart) -> CompiledConversation:
    """Precompute per-state route eligibility and snapshots for an already validated spec."""
    routes_by_state: dict[str, tuple[Route, ...]] = {}
    snapshots: dict[str, ConversationSnapshot] = {}
    for name, state in spec.states.items():
        events = chart.allowed_events(name)
        routes_by_state[name] = tuple(
            route
            for route in spec.routes
            if route.event in state.on and (route.states is None or name in route.states)
        )
        snapshots[name] = ConversationSnapshot(state=name, events=events, actions=state.actions)
    return CompiledConversation(
        chart=chart,
        routes_by_state=MappingProxyType(routes_by_state),
        snapshots=MappingProxyType(snapshots),
        routes_by_id=MappingProxyType({route.id: route for route in spec.routes}),
    )


def freeze(value: Any) -> Any:
    """A deeply immutable copy of JSON-like data (mappings become read-only proxies)."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value
