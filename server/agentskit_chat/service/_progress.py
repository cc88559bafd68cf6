"""Collects what a turn did, from its events and its model call, into one TurnReport."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from agentskit_chat.conversation import ChatDefinition, ToolResponse
from agentskit_chat.models import (
    CallInfo,
    FinishChunk,
    ModelAdapter,
    ModelChunk,
    ResponseChunk,
    TextChunk,
    UsageChunk,
    call_info,
)

from ._observer import NO_SCOPE, MigrationReport, ModelCallReport, TurnReport, TurnScope
from ._types import (
    Completed,
    Decided,
    Delta,
    Failed,
    Started,
    ToolStarted,
    TurnEvent,
    TurnRequest,
)


@dataclass(slots=True)
class ModelCall:
    """The model call of an agentic turn while it runs."""

    adapter: ModelAdapter
    model: str | None
    scope: TurnScope = NO_SCOPE
    started_ns: int = field(default_factory=time.time_ns)
    first_chunk_ns: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reasons: list[str] = field(default_factory=list)
    error_code: str | None = None
    ended_ns: int | None = None
    response: ResponseChunk | None = None

    def saw(self, chunk: ModelChunk) -> None:
        """Note one chunk (never its text)."""
        if isinstance(chunk, TextChunk):
            if self.first_chunk_ns is None:
                self.first_chunk_ns = time.time_ns()
        elif isinstance(chunk, UsageChunk):
            self.input_tokens, self.output_tokens = chunk.input_tokens, chunk.output_tokens
        elif isinstance(chunk, FinishChunk):
            self.finish_reasons.append(chunk.reason)
        elif isinstance(chunk, ResponseChunk) and self.response is None:
            self.response = chunk

    def end(self, error_code: str | None = None) -> None:
        """The call is over: it finished, failed with `error_code`, or was abandoned."""
        if self.ended_ns is None:
            self.ended_ns = time.time_ns()
            self.error_code = error_code
            self.scope.model_call_ended()

    def report(self) -> ModelCallReport:
        """The finished call, content-free."""
        info: CallInfo = call_info(self.adapter)
        response = self.response
        return ModelCallReport(
            adapter=self.adapter.name,
            provider=self.adapter.provider,
            model=self.model,
            started_ns=self.started_ns,
            ended_ns=self.ended_ns or time.time_ns(),
            first_chunk_ns=self.first_chunk_ns,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            finish_reasons=tuple(self.finish_reasons),
            error_code=self.error_code if self.ended_ns is not None else "cancelled",
            remote=info.remote,
            server_address=info.server_address,
            server_port=info.server_port,
            temperature=info.temperature,
            max_tokens=info.max_tokens,
            response_model=None if response is None else response.model,
            response_id=None if response is None else response.response_id,
        )


@dataclass(slots=True)
class TurnProgress:
    """What one turn did so far; fed by the events the runner hands to the transport."""

    request: TurnRequest
    scope: TurnScope = NO_SCOPE
    """What the observer keeps current while the turn runs."""
    started_ns: int = field(default_factory=time.time_ns)
    definition: ChatDefinition | None = None
    migration: MigrationReport | None = None
    """The move to a newer revision this turn tried, if any."""
    decided: Decided | None = None
    first_chunk_ns: int | None = None
    outcome: str | None = None
    error_code: str | None = None
    failed_route: str | None = None
    """The route whose code (or tool) failed, for `route_failed`."""
    duplicate: bool = False
    started: bool = False
    """Some event of the turn went out."""
    model_call: ModelCall | None = None
    earlier_calls: list[ModelCall] = field(default_factory=list)
    """The turn's model calls before `model_call` (server tool rounds)."""
    tool_calls: list[tuple[str, str]] = field(default_factory=list)

    def model_started(self, adapter: ModelAdapter, model: str | None) -> ModelCall:
        """The turn's model call begins; the observer's scope hears of it first."""
        self.scope.model_call_started(adapter.provider, model, call_info(adapter).remote)
        if self.model_call is not None:
            self.earlier_calls.append(self.model_call)
        self.model_call = ModelCall(adapter, model, self.scope)
        return self.model_call

    def saw(self, event: TurnEvent) -> None:
        """Note one outgoing event."""
        self.started = True
        if isinstance(event, Decided):
            self.decided = event
        elif isinstance(event, Delta):
            if self.first_chunk_ns is None:
                self.first_chunk_ns = time.time_ns()
        elif isinstance(event, Completed):
            self.outcome = "duplicate" if self.duplicate else "completed"
        elif isinstance(event, Failed):
            self.outcome = "duplicate" if self.duplicate else "failed"
            self.error_code = event.code
            self.failed_route = event.route_id
        elif isinstance(event, Started) and event.duplicate:
            self.duplicate = True
        elif isinstance(event, ToolStarted):
            self.tool_calls.append((event.call_id, event.name))

    def refused(self, reason: str) -> None:
        """The turn ended with an error instead of an event: `rejected` before it started
        (nothing happened), `error` after (its events stopped short of a terminal one)."""
        self.outcome = "error" if self.started else "rejected"
        self.error_code = reason

    def report(self) -> TurnReport:
        """The turn as it ended; `cancelled` when no terminal event went out."""
        decided, definition = self.decided, self.definition
        route_id = self.failed_route if decided is None else decided.route_id
        return TurnReport(
            session_id=self.request.session_id,
            turn_id=self.request.turn_id,
            operation=self.request.operation_name,
            outcome=self.outcome or "cancelled",
            started_ns=self.started_ns,
            ended_ns=time.time_ns(),
            definition_id=None if definition is None else definition.id,
            revision=None if definition is None else definition.revision,
            kind=None if decided is None else decided.kind,
            route_id=None if decided is None else decided.route_id,
            route_tool=_route_tool(definition, route_id),
            from_state=None if decided is None else decided.from_state,
            to_state=None if decided is None else decided.to_state,
            replayed=False if decided is None else decided.replayed,
            error_code=self.error_code,
            first_chunk_ns=self.first_chunk_ns,
            model_call=None if self.model_call is None else self.model_call.report(),
            earlier_model_calls=tuple(call.report() for call in self.earlier_calls),
            tool_calls=tuple(self.tool_calls),
            migration=self.migration,
        )


def _route_tool(definition: ChatDefinition | None, route_id: str | None) -> str | None:
    """The server tool route `route_id` runs, if it names one."""
    if definition is None or route_id is None:
        return None
    route = definition.compiled.routes_by_id.get(route_id)
    return route.response.tool if route and isinstance(route.response, ToolResponse) else None
