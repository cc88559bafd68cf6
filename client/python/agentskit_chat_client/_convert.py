"""Conversion between the client's dataclasses and the generated protobuf messages."""

from __future__ import annotations

from datetime import UTC

from agentskit.chat.v1 import chat_pb2

from ._tools import (
    ToolResults,
    TurnTools,
    approval_to_pb,
    declaration_to_pb,
    fill_tool_results,
    pending_from_pb,
    tool_call_from_pb,
    tool_call_to_pb,
    wait_from_pb,
)
from ._types import (
    AnswerOrigin,
    CancelTurnResponse,
    Definition,
    DisconnectMode,
    Dispatch,
    Edit,
    HistoryMode,
    Message,
    MigrationBlocked,
    OperationName,
    Regenerate,
    Retry,
    Role,
    RouteInfo,
    ServedRevision,
    Session,
    SessionHistory,
    Snapshot,
    StateInfo,
    Submit,
    TextDelta,
    ToolCallDelta,
    ToolCallEnded,
    ToolCallResult,
    ToolCallStarted,
    Transition,
    TurnCompleted,
    TurnDecision,
    TurnEvent,
    TurnFailed,
    TurnFailure,
    TurnKind,
    TurnOperation,
    TurnOutcome,
    TurnPage,
    TurnRecord,
    TurnStarted,
    Usage,
    WatchHeartbeat,
    WatchItem,
)

_ROLE_FROM_PB: dict[int, Role] = {
    chat_pb2.ROLE_USER: "user",
    chat_pb2.ROLE_ASSISTANT: "assistant",
    chat_pb2.ROLE_SYSTEM: "system",
    chat_pb2.ROLE_TOOL: "tool",
}
_ROLE_TO_PB: dict[str, chat_pb2.Role.ValueType] = {
    name: chat_pb2.Role.ValueType(number) for number, name in _ROLE_FROM_PB.items()
}
_KIND_FROM_PB: dict[int, TurnKind] = {
    chat_pb2.TURN_KIND_DETERMINISTIC: "deterministic",
    chat_pb2.TURN_KIND_AGENTIC: "agentic",
    chat_pb2.TURN_KIND_REPAIRED: "repaired",
    chat_pb2.TURN_KIND_FALLBACK: "fallback",
}
_OPERATION_FROM_PB: dict[int, OperationName] = {
    chat_pb2.OPERATION_SUBMIT: "submit",
    chat_pb2.OPERATION_RETRY: "retry",
    chat_pb2.OPERATION_EDIT: "edit",
    chat_pb2.OPERATION_REGENERATE: "regenerate",
    chat_pb2.OPERATION_DISPATCH: "dispatch",
    chat_pb2.OPERATION_TOOL_RESULTS: "tool_results",
}


def role_from_pb(value: int) -> Role:
    """Decode a ``Role``; unknown and unspecified values become ``"unspecified"``."""
    return _ROLE_FROM_PB.get(value, "unspecified")


def role_to_pb(role: Role) -> chat_pb2.Role.ValueType:
    """Encode a role; ``"unspecified"`` encodes to ``ROLE_UNSPECIFIED``."""
    return _ROLE_TO_PB.get(role, chat_pb2.ROLE_UNSPECIFIED)


def kind_from_pb(value: int) -> TurnKind:
    """Decode a ``TurnKind``; unknown and unspecified values become ``"unspecified"``."""
    return _KIND_FROM_PB.get(value, "unspecified")


def operation_from_pb(value: int) -> OperationName:
    """Decode an ``Operation``; unknown and unspecified values become ``"unspecified"``."""
    return _OPERATION_FROM_PB.get(value, "unspecified")


def history_mode_from_pb(value: int) -> HistoryMode:
    """Decode a ``HistoryMode``; anything but client-held is server-held."""
    return HistoryMode.CLIENT if value == chat_pb2.HISTORY_MODE_CLIENT else HistoryMode.SERVER


def history_mode_to_pb(mode: HistoryMode) -> chat_pb2.HistoryMode.ValueType:
    """Encode a ``HistoryMode``."""
    if HistoryMode(mode) is HistoryMode.CLIENT:
        return chat_pb2.HISTORY_MODE_CLIENT
    return chat_pb2.HISTORY_MODE_SERVER


_OUTCOME_FROM_PB: dict[int, TurnOutcome] = {
    chat_pb2.TURN_OUTCOME_RUNNING: "running",
    chat_pb2.TURN_OUTCOME_COMPLETED: "completed",
    chat_pb2.TURN_OUTCOME_FAILED: "failed",
}


def _optional(text: str) -> str | None:
    return text or None


def message_from_pb(message: chat_pb2.Message) -> Message:
    """Decode a ``Message`` with the origin of an answer."""
    origin = None
    if message.HasField("origin"):
        found = message.origin
        origin = AnswerOrigin(
            kind=kind_from_pb(found.kind),
            route_id=_optional(found.route_id),
            from_state=found.from_state,
            to_state=found.to_state,
            replayed=found.replayed,
            turn_id=_optional(found.turn_id),
        )
    return Message(
        id=message.id,
        role=role_from_pb(message.role),
        content=message.content,
        origin=origin,
        tool_calls=tuple(tool_call_from_pb(call) for call in message.tool_calls),
        tool_call_id=_optional(message.tool_call_id),
    )


def _usage(usage: chat_pb2.Usage) -> Usage:
    return Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)


def turn_record_from_pb(turn: chat_pb2.TurnRecord) -> TurnRecord:
    """Decode a ``TurnRecord``."""
    failure = None
    if turn.HasField("failure"):
        failed = turn.failure
        failure = TurnFailure(
            code=failed.code,
            message=failed.message,
            retryable=failed.retryable,
            route_id=_optional(failed.route_id),
        )
    return TurnRecord(
        turn_id=turn.turn_id,
        operation=operation_from_pb(turn.operation),
        outcome=_OUTCOME_FROM_PB.get(turn.outcome, "unspecified"),
        user_message_id=_optional(turn.user_message_id),
        assistant_message_id=_optional(turn.assistant_message_id),
        kind=kind_from_pb(turn.kind),
        route_id=_optional(turn.route_id),
        from_state=_optional(turn.from_state),
        to_state=_optional(turn.to_state),
        replayed=turn.replayed,
        failure=failure,
        start_time=turn.start_time.ToDatetime(tzinfo=UTC) if turn.HasField("start_time") else None,
        end_time=turn.end_time.ToDatetime(tzinfo=UTC) if turn.HasField("end_time") else None,
        usage=_usage(turn.usage) if turn.HasField("usage") else None,
        pending_tool_calls=tuple(pending_from_pb(p) for p in turn.pending_tool_calls),
        unknown_tool_calls=tuple(pending_from_pb(p) for p in turn.unknown_tool_calls),
    )


def turn_page_from_pb(response: chat_pb2.ListTurnsResponse) -> TurnPage:
    """Decode a ``ListTurns`` reply."""
    return TurnPage(
        turns=tuple(turn_record_from_pb(turn) for turn in response.turns),
        next_page_token=_optional(response.next_page_token),
    )


def message_to_pb(message: Message) -> chat_pb2.Message:
    """Encode a ``Message``."""
    return chat_pb2.Message(
        id=message.id,
        role=role_to_pb(message.role),
        content=message.content,
        tool_calls=[tool_call_to_pb(call) for call in message.tool_calls],
        tool_call_id=message.tool_call_id or "",
    )


def snapshot_from_pb(snapshot: chat_pb2.Snapshot) -> Snapshot:
    """Decode a ``Snapshot``."""
    return Snapshot(
        state=snapshot.state,
        allowed_events=tuple(snapshot.allowed_events),
        actions=tuple(snapshot.actions),
    )


def definition_from_pb(definition: chat_pb2.Definition) -> Definition:
    """Decode a ``Definition`` with its states and routes."""
    return Definition(
        id=definition.id,
        revision=definition.revision,
        description=definition.description,
        initial_state=definition.initial_state,
        states=tuple(
            StateInfo(
                name=state.name,
                transitions=tuple(
                    Transition(event=transition.event, target=transition.target)
                    for transition in state.transitions
                ),
                actions=tuple(state.actions),
            )
            for state in definition.states
        ),
        routes=tuple(
            RouteInfo(
                id=route.id,
                event=route.event,
                states=tuple(route.states),
                kind=kind_from_pb(route.kind),
                matcher=route.matcher,
                input_text=route.input_text,
            )
            for route in definition.routes
        ),
        model_adapter=definition.model_adapter,
        served_revisions=tuple(
            ServedRevision(
                revision=served.revision,
                weight=served.weight,
                migrates_from=tuple(served.migrates_from),
            )
            for served in definition.served_revisions
        ),
    )


def session_from_pb(session: chat_pb2.Session) -> Session:
    """Decode a ``Session``."""
    return Session(
        session_id=session.session_id,
        definition_id=session.definition_id,
        definition_revision=session.definition_revision,
        history_mode=history_mode_from_pb(session.history_mode),
        snapshot=snapshot_from_pb(session.snapshot),
        cursor=session.cursor,
        migration_blocked=(
            MigrationBlocked(
                revision=session.migration_blocked.revision, code=session.migration_blocked.code
            )
            if session.HasField("migration_blocked")
            else None
        ),
    )


def session_history_from_pb(
    response: chat_pb2.GetSessionResponse | chat_pb2.TruncateHistoryResponse,
) -> SessionHistory:
    """Decode a session with its messages from a ``GetSession`` or ``TruncateHistory`` reply."""
    return SessionHistory(
        session=session_from_pb(response.session),
        messages=tuple(message_from_pb(message) for message in response.messages),
    )


_DISCONNECT_TO_PB: dict[DisconnectMode, chat_pb2.DisconnectMode.ValueType] = {
    DisconnectMode.CANCEL: chat_pb2.DISCONNECT_MODE_CANCEL,
    DisconnectMode.CONTINUE: chat_pb2.DISCONNECT_MODE_CONTINUE,
}


def turn_request(
    session_id: str,
    turn_id: str,
    operation: TurnOperation,
    expected_cursor: int | None = None,
    on_disconnect: DisconnectMode | None = None,
    tools: TurnTools | None = None,
) -> chat_pb2.StreamTurnRequest:
    """Build the ``StreamTurnRequest`` that runs ``operation``; ``None`` ids are sent empty
    and a ``None`` disconnect mode is not sent."""
    request = chat_pb2.StreamTurnRequest(
        session_id=session_id,
        turn_id=turn_id,
        expected_cursor=expected_cursor,
        on_disconnect=(
            chat_pb2.DISCONNECT_MODE_UNSPECIFIED
            if on_disconnect is None
            else _DISCONNECT_TO_PB[DisconnectMode(on_disconnect)]
        ),
    )
    match operation:
        case Submit(content=content, message_id=message_id):
            request.submit.content = content
            request.submit.message_id = message_id or ""
        case Retry(message_id=message_id):
            request.retry.message_id = message_id or ""
        case Edit(message_id=message_id, content=content):
            request.edit.message_id = message_id
            request.edit.content = content
        case Regenerate(message_id=message_id):
            request.regenerate.message_id = message_id or ""
        case Dispatch(messages=messages, approvals=approvals):
            request.dispatch.SetInParent()
            request.dispatch.messages.extend(message_to_pb(message) for message in messages)
            request.dispatch.approvals.extend(approval_to_pb(a) for a in approvals)
        case ToolResults():
            fill_tool_results(request.tool_results, operation)
        case _:
            raise TypeError(f"not a turn operation: {type(operation).__name__}")
    if tools is not None:
        request.tools.extend(declaration_to_pb(tool) for tool in tools.tools)
        request.tool_choice = tools.choice
        if tools.parallel is not None:
            request.parallel_tool_calls = tools.parallel
    return request


def event_from_pb(response: chat_pb2.StreamTurnResponse) -> TurnEvent | None:
    """Decode one turn event; ``None`` when it holds no event this client version knows."""
    session_id = response.session_id
    turn_id = response.turn_id
    sequence = response.sequence
    time = response.time.ToDatetime(tzinfo=UTC)
    match response.WhichOneof("event"):
        case "started":
            started = response.started
            return TurnStarted(
                session_id=session_id,
                turn_id=turn_id,
                sequence=sequence,
                time=time,
                operation=operation_from_pb(started.operation),
                user_message_id=_optional(started.user_message_id),
                duplicate=started.duplicate,
                assistant_message_id=_optional(started.assistant_message_id),
            )
        case "decision":
            decision = response.decision
            return TurnDecision(
                session_id=session_id,
                turn_id=turn_id,
                sequence=sequence,
                time=time,
                kind=kind_from_pb(decision.kind),
                route_id=_optional(decision.route_id),
                from_state=decision.from_state,
                to_state=decision.to_state,
                replayed=decision.replayed,
            )
        case "delta":
            return TextDelta(
                session_id=session_id,
                turn_id=turn_id,
                sequence=sequence,
                time=time,
                text=response.delta.text,
            )
        case "completed":
            completed = response.completed
            usage = completed.usage if completed.HasField("usage") else None
            return TurnCompleted(
                session_id=session_id,
                turn_id=turn_id,
                sequence=sequence,
                time=time,
                assistant_message_id=completed.assistant_message_id,
                content=completed.content,
                snapshot=snapshot_from_pb(completed.snapshot),
                cursor=completed.cursor,
                usage=None if usage is None else _usage(usage),
                finish_reason=_optional(completed.finish_reason),
                tool_calls=tuple(tool_call_from_pb(call) for call in completed.tool_calls),
                pending_tool_calls=tuple(pending_from_pb(p) for p in completed.pending_tool_calls),
            )
        case "tool_call_started":
            return ToolCallStarted(
                session_id=session_id,
                turn_id=turn_id,
                sequence=sequence,
                time=time,
                tool_call_id=response.tool_call_started.tool_call_id,
                name=response.tool_call_started.name,
                wait=wait_from_pb(response.tool_call_started.wait),
            )
        case "tool_call_delta":
            return ToolCallDelta(
                session_id=session_id,
                turn_id=turn_id,
                sequence=sequence,
                time=time,
                tool_call_id=response.tool_call_delta.tool_call_id,
                arguments_delta=response.tool_call_delta.arguments_delta,
            )
        case "tool_call_ended":
            ended = response.tool_call_ended
            return ToolCallEnded(
                session_id=session_id,
                turn_id=turn_id,
                sequence=sequence,
                time=time,
                tool_call_id=ended.tool_call_id,
                arguments=ended.arguments,
                wait=wait_from_pb(ended.wait),
            )
        case "tool_call_result":
            ran = response.tool_call_result
            return ToolCallResult(
                session_id=session_id,
                turn_id=turn_id,
                sequence=sequence,
                time=time,
                tool_call_id=ran.tool_call_id,
                content=ran.content,
                error_type=_optional(ran.error_type),
                message_id=_optional(ran.message_id),
            )
        case "failed":
            failed = response.failed
            return TurnFailed(
                session_id=session_id,
                turn_id=turn_id,
                sequence=sequence,
                time=time,
                code=failed.code,
                message=failed.message,
                retryable=failed.retryable,
                route_id=_optional(failed.route_id),
            )
        case _:
            return None


def is_terminal(response: chat_pb2.StreamTurnResponse) -> bool:
    """True for a turn's last event: completed or failed."""
    return response.WhichOneof("event") in ("completed", "failed")


def cancel_turn_from_pb(response: chat_pb2.CancelTurnResponse) -> CancelTurnResponse:
    """Decode a ``CancelTurnResponse``."""
    turn = turn_record_from_pb(response.turn) if response.HasField("turn") else None
    return CancelTurnResponse(cancelled=response.cancelled, turn=turn)


def watch_item_from_pb(response: chat_pb2.WatchSessionResponse) -> WatchItem | None:
    """Decode one WatchSession item; ``None`` when it holds nothing this version knows."""
    match response.WhichOneof("item"):
        case "session":
            return session_from_pb(response.session)
        case "event":
            return event_from_pb(response.event)
        case "heartbeat":
            return WatchHeartbeat(time=response.heartbeat.time.ToDatetime(tzinfo=UTC))
        case _:
            return None
