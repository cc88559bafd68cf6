"""Route hints: which routes a renderer may offer as buttons in the current snapshot.

A route is eligible when its event is among the snapshot's allowed events and, when the
route is restricted to some states, the current state is one of them: the same rule the
server applies before it tries a route's matcher. A route with a fixed ``input_text`` (a
``command`` or ``exact`` matcher) can then be drawn as a button that sends that text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

__all__ = ["EligibleRoute", "OfferedRoute", "SnapshotLike", "command_hints", "eligible_routes"]


class SnapshotLike(Protocol):
    """What eligibility needs of a snapshot: the state and the events it allows."""

    @property
    def state(self) -> str:
        """The current state."""
        ...

    @property
    def allowed_events(self) -> Sequence[str]:
        """Events the current state allows."""
        ...


class EligibleRoute(Protocol):
    """What eligibility needs of a route: its event and its state restriction."""

    @property
    def event(self) -> str:
        """The event the route fires."""
        ...

    @property
    def states(self) -> Sequence[str]:
        """States the route is restricted to; empty means every state allowing the event."""
        ...


class OfferedRoute(EligibleRoute, Protocol):
    """A route that may carry a fixed input to offer as a button."""

    @property
    def input_text(self) -> str:
        """The input that fires the route; empty when no single text does."""
        ...


_Route = TypeVar("_Route", bound=EligibleRoute)


def eligible_routes(routes: Iterable[_Route], snapshot: SnapshotLike) -> list[_Route]:
    """The routes of ``routes`` that may answer in ``snapshot``, in their given order."""
    allowed = set(snapshot.allowed_events)
    return [
        route
        for route in routes
        if route.event in allowed and (not route.states or snapshot.state in route.states)
    ]


def command_hints(routes: Iterable[OfferedRoute], snapshot: SnapshotLike) -> list[str]:
    """The inputs to offer as buttons in ``snapshot``: the ``input_text`` of each eligible
    route that has one, in route order, each text once."""
    offered: list[str] = []
    for route in eligible_routes(routes, snapshot):
        if route.input_text and route.input_text not in offered:
            offered.append(route.input_text)
    return offered
