"""How sessions of an older revision move to the revision that declares the migration (a
module of its own: the definition holds migrations, `_revisions` applies them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Migration:
    """How sessions of revision `source` move to the revision that declares it."""

    source: int
    states: Mapping[str, str]
    """Old state name -> new state name; a state not listed keeps its name."""
    routes: Mapping[str, str | None]
    """Old route id -> new route id, or None for a route the new revision dropped; a
    route not listed keeps its id."""

    def state(self, name: str) -> str:
        """The new name of the old state `name`."""
        return self.states.get(name, name)

    def route(self, route_id: str) -> str | None:
        """The new id of the old route `route_id`; None when it is gone."""
        return self.routes.get(route_id, route_id)
