"""What a dispatch produces: a routed answer, a delegation to the model, or a safe failure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from ._decisions import Checkpoint, ConversationState, Decision, HistoryKey
from ._definition import ChatDefinition, Route
from ._responses import RouteToolError
from ._statechart import Accepted, StatechartInstance
from ._trace import TraceRecord, TurnOutcome
from ._types import ConversationSnapshot, Message, TurnKind

ROUTE_FAILED: Final = "route_failed"
ROUTE_FAILED_MESSAGE: Final = "Deterministic route failed."


@dataclass(frozen=True, slots=True)
class RouteOutcome:
    """A route answered (or a recorded decision was replayed); the transition is in `state`."""

    decision: Decision
    replayed: bool
    state: ConversationState
    snapshot: ConversationSnapshot
    trace: TraceRecord

    @property
    def response(self) -> str:
        """The text to stream to the user."""
        return self.decision.response


@dataclass(frozen=True, slots=True)
class DelegateOutcome:
    """No route matched: send `messages`, unchanged, to the model adapter."""

    messages: tuple[Message, ...] = field(repr=False)
    message_id: str | None
    state: ConversationState
    snapshot: ConversationSnapshot
    trace: TraceRecord


@dataclass(frozen=True, slots=True)
class FailureOutcome:
    """A route callback raised or timed out; `state` is the untouched input state."""

    route_id: str
    message_id: str
    error_type: str
    """Class name of the exception, for operators; never its message."""
    state: ConversationState
    snapshot: ConversationSnapshot
    trace: TraceRecord
    code: str = ROUTE_FAILED
    message: str = ROUTE_FAILED_MESSAGE


Outcome = RouteOutcome | DelegateOutcome | FailureOutcome


def history_key(users: Sequence[Message]) -> HistoryKey:
    """Identity of a run of user messages: their ids, and a fingerprint of their contents.

    The fingerprint is Python's (per-process, randomly seeded) string hash: a collision is
    out of reach of any client, and a miss only costs a full rebuild.
    """
    return tuple([m.id for m in users]), hash(tuple([m.content for m in users]))


def answer(
    definition: ChatDefinition,
    before: StatechartInstance,
    moved: Accepted,
    kept: dict[str, Decision],
    basis: HistoryKey,
    users: Sequence[Message],
    decision: Decision,
    *,
    replayed: bool,
) -> RouteOutcome:
    prior = MappingProxyType(dict(kept))
    kept[decision.message_id] = decision
    after = moved.instance
    decisions = MappingProxyType(kept)
    state = ConversationState(
        instance=after,
        decisions=decisions,
        checkpoints=(
            Checkpoint(basis, before, prior),
            Checkpoint(history_key(users), after, decisions),
        ),
    )
    trace = TraceRecord(
        definition_id=definition.id,
        revision=definition.revision,
        session_id=after.id,
        message_id=decision.message_id,
        kind=decision.kind,
        outcome=TurnOutcome.COMPLETED,
        route_id=decision.route_id,
        from_state=decision.from_state,
        to_state=decision.to_state,
        replayed=replayed,
    )
    return RouteOutcome(decision, replayed, state, definition.snapshot(after.state), trace)


def delegate(
    definition: ChatDefinition,
    instance: StatechartInstance,
    kept: dict[str, Decision],
    users: Sequence[Message],
    messages: Sequence[Message],
    message_id: str | None,
) -> DelegateOutcome:
    decisions = MappingProxyType(kept)
    state = ConversationState(
        instance=instance,
        decisions=decisions,
        checkpoints=(Checkpoint(history_key(users), instance, decisions),),
    )
    trace = TraceRecord(
        definition_id=definition.id,
        revision=definition.revision,
        session_id=instance.id,
        message_id=message_id,
        kind=TurnKind.AGENTIC,
        outcome=TurnOutcome.DELEGATED,
        route_id=None,
        from_state=instance.state,
        to_state=instance.state,
        replayed=False,
    )
    return DelegateOutcome(
        tuple(messages), message_id, state, definition.snapshot(instance.state), trace
    )


def fail(
    definition: ChatDefinition,
    state: ConversationState,
    route: Route,
    message_id: str,
    exc: BaseException,
) -> FailureOutcome:
    trace = TraceRecord(
        definition_id=definition.id,
        revision=definition.revision,
        session_id=state.instance.id,
        message_id=message_id,
        kind=route.kind,
        outcome=TurnOutcome.FAILED,
        route_id=route.id,
        from_state=state.state,
        to_state=state.state,
        replayed=False,
        error_code=ROUTE_FAILED,
    )
    return FailureOutcome(
        route_id=route.id,
        message_id=message_id,
        error_type=exc.error_type if isinstance(exc, RouteToolError) else type(exc).__name__,
        state=state,
        snapshot=definition.snapshot(state.state),
        trace=trace,
    )
