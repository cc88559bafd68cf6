"""The telemetry port: one content-free report per turn, handed over when the turn ends.

Reports carry decision metadata and timings only. No field holds message text, route
responses or model output, so an observer cannot leak content it never receives.

An observer may also implement `TurnTracer.turn_started`: the runner calls it as the turn
begins and keeps the returned TurnScope around the turn's work, so a tracing observer can
make its turn span (and, during a model call, the model call's span) the current one
while route code and the model adapter run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ._types import TurnRequest


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
    remote: bool = True
    """The adapter calls a model; False for local stand-ins such as `offline`."""
    server_address: str | None = None
    """Host of the model endpoint."""
    server_port: int | None = None
    temperature: float | None = None
    """The requested sampling temperature, when the definition sets one."""
    max_tokens: int | None = None
    """The requested output token limit, when the definition sets one."""
    response_model: str | None = None
    """The model that answered, as the model server named it."""
    response_id: str | None = None
    """The completion's id, as the model server named it."""


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """A session's move to a newer revision, tried before its turn ran."""

    from_revision: int
    to_revision: int
    outcome: str
    """`migrated`, or `stayed` when the session could not move."""
    code: str | None = None
    """Why it stayed: `unknown_route`, `unknown_state` or `replay`."""


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
    route_tool: str | None = None
    """The server tool the route ran (or tried), when it names one: never its arguments."""
    from_state: str | None = None
    to_state: str | None = None
    replayed: bool = False
    error_code: str | None = None
    """The failure code (`failed`), or the reason (`rejected`, `error`; `internal` when
    the error was not the service's own)."""
    first_chunk_ns: int | None = None
    """When the first piece of the answer was handed to the transport."""
    model_call: ModelCallReport | None = None
    """The turn's last model call (its only one unless server tools ran in rounds)."""
    earlier_model_calls: tuple[ModelCallReport, ...] = ()
    """The turn's model calls before `model_call`, oldest first (server tool rounds)."""
    tool_calls: tuple[tuple[str, str], ...] = ()
    """(call id, tool name) of each tool call the answer streamed: never arguments or results."""
    migration: MigrationReport | None = None
    """The session's move to a newer revision this turn tried, if any."""


def model_calls(report: TurnReport) -> tuple[ModelCallReport, ...]:
    """Every model call of the turn, oldest first."""
    last = () if report.model_call is None else (report.model_call,)
    return (*report.earlier_model_calls, *last)


class TurnObserver(Protocol):
    """Receives a report for every turn; must return quickly and never raise."""

    def turn_finished(self, report: TurnReport) -> None:
        """Called once per turn, in the turn's own context, after its last event."""
        ...


class TurnScope(Protocol):
    """What a tracing observer keeps current while one turn runs; never raises."""

    def model_call_started(self, provider: str, model: str | None, remote: bool) -> None:
        """The turn's model call begins: its span, if any, becomes the current one."""
        ...

    def model_call_ended(self) -> None:
        """The model call is over: the turn's span is the current one again."""
        ...

    def leave(self) -> None:
        """The turn is over and reported: restore what was current before it."""
        ...


class TurnTracer(Protocol):
    """The optional part of an observer that is called as each turn begins."""

    def turn_started(self, request: TurnRequest) -> TurnScope:
        """Called in the turn's own context before any of its work; the scope's `leave` is
        called after `turn_finished`."""
        ...


class NoScope:
    """Keeps nothing current."""

    def model_call_started(self, provider: str, model: str | None, remote: bool) -> None:
        """Nothing to start."""

    def model_call_ended(self) -> None:
        """Nothing to end."""

    def leave(self) -> None:
        """Nothing to restore."""


NO_SCOPE = NoScope()


class NoObserver:
    """Telemetry switched off."""

    def turn_finished(self, report: TurnReport) -> None:
        """Ignore the report."""
