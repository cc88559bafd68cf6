"""Trace records: decision metadata of one turn, never content."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ._types import TurnKind


class TurnOutcome(StrEnum):
    """How a turn ended inside the core."""

    COMPLETED = "completed"
    """A route answered, or a recorded decision was replayed."""
    DELEGATED = "delegated"
    """No route matched; the request goes to the model."""
    FAILED = "failed"
    """A route callback failed; nothing was committed."""


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """What observers receive for each turn; holds identifiers and names only."""

    definition_id: str
    revision: int
    session_id: str
    message_id: str | None
    kind: TurnKind
    outcome: TurnOutcome
    route_id: str | None
    from_state: str
    to_state: str
    replayed: bool
    error_code: str | None = None
