"""A small pure statechart: definitions compile once into frozen tables; transitions are typed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Final

_NO_EVENTS: Final[tuple[str, ...]] = ()


class RejectionReason(StrEnum):
    """Why a transition was refused."""

    EVENT_NOT_ALLOWED = "event_not_allowed"
    UNKNOWN_STATE = "unknown_state"


@dataclass(frozen=True, slots=True)
class ChartIssue:
    """A generic problem found while compiling a statechart (mapped to diagnostics by callers)."""

    code: str
    path: str
    message: str


@dataclass(frozen=True, slots=True)
class Statechart:
    """Compiled, immutable transition tables; build with `compile_statechart`."""

    initial: str
    states: tuple[str, ...]
    _targets: Mapping[tuple[str, str], str] = field(repr=False)
    _events: Mapping[str, tuple[str, ...]] = field(repr=False)

    def allowed_events(self, state: str) -> tuple[str, ...]:
        """Events the state declares, in declaration order."""
        return self._events.get(state, _NO_EVENTS)

    def target(self, state: str, event: str) -> str | None:
        """The state `event` leads to from `state`, or None when not allowed."""
        return self._targets.get((state, event))

    def has_state(self, state: str) -> bool:
        """Whether the chart declares `state`."""
        return state in self._events


@dataclass(frozen=True, slots=True)
class StatechartInstance:
    """One immutable position in a chart; identity and time are supplied by the host."""

    id: str
    state: str
    version: int = 0
    """Number of accepted transitions that led here."""
    updated_at: float | None = None


@dataclass(frozen=True, slots=True)
class Accepted:
    """The event was allowed; `instance` is the new position."""

    previous: StatechartInstance
    instance: StatechartInstance
    event: str

    @property
    def from_state(self) -> str:
        """State before the transition."""
        return self.previous.state

    @property
    def to_state(self) -> str:
        """State after the transition."""
        return self.instance.state


@dataclass(frozen=True, slots=True)
class Rejected:
    """The event was refused; `instance` is unchanged."""

    instance: StatechartInstance
    event: str
    reason: RejectionReason


TransitionResult = Accepted | Rejected


def chart_issues(initial: str, states: Mapping[str, Mapping[str, str]]) -> list[ChartIssue]:
    """Every generic problem of a chart declaration: names, initial state, targets."""
    issues: list[ChartIssue] = []
    if not states:
        issues.append(ChartIssue("no_states", "states", "at least one state is required"))
    for name, events in states.items():
        if not name.strip():
            issues.append(
                ChartIssue("empty_state_name", f"states.{name}", "state names must not be empty")
            )
        for event, target in events.items():
            path = f"states.{name}.on.{event}"
            if not event.strip():
                issues.append(ChartIssue("empty_event", path, "event names must not be empty"))
            if target not in states:
                issues.append(
                    ChartIssue(
                        "unknown_transition_target",
                        path,
                        f"transition target {target!r} is not a declared state",
                    )
                )
    if states and initial not in states:
        issues.append(
            ChartIssue(
                "unknown_initial_state", "initial", f"initial state {initial!r} is not declared"
            )
        )
    return issues


def compile_statechart(initial: str, states: Mapping[str, Mapping[str, str]]) -> Statechart:
    """Compile a declaration into frozen lookup tables; raises ValueError when it is invalid."""
    issues = chart_issues(initial, states)
    if issues:
        raise ValueError("; ".join(f"{i.path}: {i.message}" for i in issues))
    targets = {
        (name, event): target for name, events in states.items() for event, target in events.items()
    }
    events = {name: tuple(on) for name, on in states.items()}
    return Statechart(
        initial=initial,
        states=tuple(states),
        _targets=MappingProxyType(targets),
        _events=MappingProxyType(events),
    )


def create_instance(chart: Statechart, *, id: str, at: float | None = None) -> StatechartInstance:
    """A fresh instance at the chart's initial state."""
    return StatechartInstance(id=id, state=chart.initial, version=0, updated_at=at)


def transition(
    chart: Statechart, instance: StatechartInstance, event: str, *, at: float | None = None
) -> TransitionResult:
    """Apply `event`; pure, never mutates, never ignores a disallowed event silently."""
    if not chart.has_state(instance.state):
        return Rejected(instance, event, RejectionReason.UNKNOWN_STATE)
    target = chart.target(instance.state, event)
    if target is None:
        return Rejected(instance, event, RejectionReason.EVENT_NOT_ALLOWED)
    moved = StatechartInstance(
        instance.id, target, instance.version + 1, instance.updated_at if at is None else at
    )
    return Accepted(instance, moved, event)
