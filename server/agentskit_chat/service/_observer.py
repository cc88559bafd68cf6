"""The telemetry port: one content-free report per turn, handed over when the turn ends.

Reports carry decision metadata and timings only. No field holds message text, route
responses or model output, so an observer cannot leak content it never receives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ModelCallReport:
    """One call to a model adapter during an agentic turn."""

    adapter: str
    """The adapter's registry name, such as `openai` or `offline`."""
    provider: str
    """`gen_ai.provider.name`, such as `openai`."""
    model: str | None
    """The requested model name, when the definition names one."""
    started_ns: int
    """Wall-clock nanoseconds when the call began."""
    ended_ns: int
    first_chunk_ns: int | None = None
    """When the first text chunk arrived; None when none did."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reasons: tuple[str, ...] = ()
    error_code: str | None = None
    """The stable failure code when the call failed, `cancelled` when it was abandoned."""


@dataclass(frozen=True, slots=True)
class TurnReport:
    """How one StreamTurn call ended.

    `outcome` is `completed`, `failed` (recorded, nothing else committed), `cancelled` (the
    client went away or its deadline passed; nothing recorded), `rejected` (refused before
    any event), `error` (an error, such as an unreachable store, ended the turn after it
    started) or `duplicate` (a finished turn id, answered from its record).
    """

    session_id: str
    turn_id: str
    operation: str
    outcome: str
    started_ns: int
    """Wall-clock nanoseconds when the request reached the service."""
    ended_ns: int
    definition_id: str | None = None
    revision: int | None = None
    kind: str | None = None
    """`deterministic`, `agentic`, `repaired` or `fallback`, once decided."""
    route_id: str | None = None
    from_state: str | None = None
    to_state: str | None = None
    replayed: bool = False
    error_code: str | None = None
    """The failure code (`failed`), or the reason (`rejected`, `error`; `internal` when
    the error was not the service's own)."""
    first_chunk_ns: int | None = None
    """When the first piece of the answer was handed to the transport."""
    model_call: ModelCallReport | None = None


class TurnObserver(Protocol):
    """Receives a report for every turn; must return quickly and never raise."""

    def turn_finished(self, report: TurnReport) -> None:
        """Called once per turn, in the turn's own task, after its last event."""
        ...


class NoObserver:
    """Telemetry switched off."""

    def turn_finished(self, report: TurnReport) -> None:
        """Ignore the report."""
