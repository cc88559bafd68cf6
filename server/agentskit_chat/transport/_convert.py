"""Translation between protobuf messages and application-service types."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.conversation import (
    ChatDefinition,
    ConversationSnapshot,
    Message,
    PendingCall,
    Role,
    ToolCall,
)
from agentskit_chat.models import NO_TOOLS, ToolOptions, ToolSpec
from agentskit_chat.service import (
    AnswerOrigin,
    Approval,
    CancelOutcome,
    Completed,
    Decided,
    Delta,
    DisconnectMode,
    Dispatch,
    Edit,
    Failed,
    Heartbeat,
    Limits,
    Operation,
    Regenerate,
    Retry,
    ServedRevision,
    SessionHistory,
    SessionView,
    Started,
    Submit,
    ToolDelta,
    ToolEnded,
    ToolRan,
    ToolResult,
    ToolResults,
    ToolStarted,
    TurnEvent,
    TurnView,
    Usage,
    WatchedEvent,
    WatchItem,
    invalid,
    limit_exceeded,
)
from agentskit_chat.storage import HistoryMode

KINDS: Final = {
    "deterministic": pb.TURN_KIND_DETERMINISTIC,
    "agentic": pb.TURN_KIND_AGENTIC,
    "repaired": pb.TURN_KIND_REPAIRED,
    "fallback": pb.TURN_KIND_FALLBACK,
}
OPERATIONS: Final = {
    "submit": pb.OPERATION_SUBMIT,
    "retry": pb.OPERATION_RETRY,
    "edit": pb.OPERATION_EDIT,
    "regenerate": pb.OPERATION_REGENERATE,
    "dispatch": pb.OPERATION_DISPATCH,
    "tool_results": pb.OPERATION_TOOL_RESULTS,
}
WAITS: Final = {
    "result": pb.TOOL_WAIT_RESULT,
    "approval": pb.TOOL_WAIT_APPROVAL,
    "server": pb.TOOL_WAIT_SERVER,
}
TOOL_CHOICES: Final = frozenset({"auto", "none", "required"})
_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
ROLES: Final = {
    Role.USER: pb.ROLE_USER,
    Role.ASSISTANT: pb.ROLE_ASSISTANT,
    Role.SYSTEM: pb.ROLE_SYSTEM,
    Role.TOOL: pb.ROLE_TOOL,
}
ROLE_OF: Final = {value: role for role, value in ROLES.items()}
OUTCOMES: Final = {
    "running": pb.TURN_OUTCOME_RUNNING,
    "completed": pb.TURN_OUTCOME_COMPLETED,
    "failed": pb.TURN_OUTCOME_FAILED,
}
MODES: Final = {
    HistoryMode.SERVER: pb.HISTORY_MODE_SERVER,
    HistoryMode.CLIENT: pb.HISTORY_MODE_CLIENT,
}


def history_mode(value: pb.HistoryMode.ValueType) -> HistoryMode:
    """The requested history mode; server-held when unspecified."""
    if value == pb.HISTORY_MODE_CLIENT:
        return HistoryMode.CLIENT
    if value in (pb.HISTORY_MODE_SERVER, pb.HISTORY_MODE_UNSPECIFIED):
        return HistoryMode.SERVER
    raise invalid("history_mode", "history_mode has an unknown value")


def disconnect_mode(value: pb.DisconnectMode.ValueType) -> DisconnectMode:
    """What the end of a turn's stream does to it; cancel when unspecified."""
    if value == pb.DISCONNECT_MODE_CONTINUE:
        return DisconnectMode.CONTINUE
    if value in (pb.DISCONNECT_MODE_CANCEL, pb.DISCONNECT_MODE_UNSPECIFIED):
        return DisconnectMode.CANCEL
    raise invalid("on_disconnect", "on_disconnect has an unknown value")


def cancel_outcome(outcome: CancelOutcome) -> pb.CancelTurnResponse:
    """What a cancel did, as the contract sends it."""
    response = pb.CancelTurnResponse(cancelled=outcome.cancelled)
    if outcome.turn is not None:
        response.turn.CopyFrom(turn(outcome.turn))
    return response


def operation(request: pb.StreamTurnRequest) -> Operation:
    """The operation of a StreamTurn request."""
    which = request.WhichOneof("operation")
    if which == "submit":
        return Submit(request.submit.content, request.submit.message_id or None)
    if which == "retry":
        return Retry(request.retry.message_id or None)
    if which == "edit":
        if not request.edit.message_id:
            raise invalid("edit.message_id", "edit.message_id is required")
        return Edit(request.edit.message_id, request.edit.content)
    if which == "regenerate":
        return Regenerate(request.regenerate.message_id or None)
    if which == "dispatch":
        dispatched = tuple(_message(m, i) for i, m in enumerate(request.dispatch.messages))
        return Dispatch(dispatched, _approvals(request.dispatch.approvals))
    if which == "tool_results":
        results = tuple(
            ToolResult(r.tool_call_id, r.content, r.message_id or None)
            for r in request.tool_results.results
        )
        return ToolResults(results, _approvals(request.tool_results.approvals))
    raise invalid(
        "operation",
        "one operation (submit, retry, edit, regenerate, dispatch, tool_results) is required",
    )


def _approvals(values: Sequence[pb.ToolApproval]) -> tuple[Approval, ...]:
    return tuple(Approval(a.tool_call_id, a.approved, a.reason) for a in values)


def tool_options(request: pb.StreamTurnRequest, limits: Limits) -> ToolOptions:
    """The tools a StreamTurn request declares, checked against `limits`."""
    if (
        not request.tools
        and not request.tool_choice
        and not request.HasField("parallel_tool_calls")
    ):
        return NO_TOOLS
    if len(request.tools) > limits.max_tools:
        raise limit_exceeded(
            "tools", limits.max_tools, f"a turn may declare at most {limits.max_tools} tools"
        )
    specs: list[ToolSpec] = []
    for index, tool in enumerate(request.tools):
        where = f"tools[{index}]"
        if _TOOL_NAME.fullmatch(tool.name) is None:
            raise invalid(f"{where}.name", f"{where}.name must be 1-64 letters, digits, _ or -")
        if any(spec.name == tool.name for spec in specs):
            raise invalid(f"{where}.name", f"{where}.name repeats an earlier tool")
        size = len(tool.description.encode()) + len(tool.parameters_json.encode())
        if size > limits.max_tool_schema_bytes:
            raise limit_exceeded(
                "tool_schema_bytes",
                limits.max_tool_schema_bytes,
                f"{where} is larger than {limits.max_tool_schema_bytes} bytes",
            )
        specs.append(ToolSpec(tool.name, tool.description, _schema(where, tool.parameters_json)))
    choice = request.tool_choice or None
    if choice is not None and choice not in TOOL_CHOICES and all(s.name != choice for s in specs):
        raise invalid(
            "tool_choice", "tool_choice must be auto, none, required or a declared tool's name"
        )
    parallel = request.parallel_tool_calls if request.HasField("parallel_tool_calls") else None
    return ToolOptions(tuple(specs), choice, parallel)


def _schema(where: str, text: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        raise invalid(f"{where}.parameters_json", f"{where}.parameters_json is not JSON") from None
    if not isinstance(value, dict):
        raise invalid(
            f"{where}.parameters_json", f"{where}.parameters_json must be a JSON Schema object"
        )
    return value


def _message(message: pb.Message, index: int) -> Message:
    role = ROLE_OF.get(message.role)
    if role is None:
        field = f"dispatch.messages[{index}].role"
        raise invalid(field, f"{field} must be a known role")
    if not message.tool_calls and not message.tool_call_id:
        return Message(message.id, role, message.content)
    calls = tuple(ToolCall(c.id, c.name, c.arguments) for c in message.tool_calls)
    return Message(message.id, role, message.content, calls, message.tool_call_id or None)


def message(value: Message, origin: AnswerOrigin | None = None) -> pb.Message:
    """A history message as the contract sends it, with the origin of an answer."""
    result = pb.Message(id=value.id, role=ROLES[value.role], content=value.content)
    if value.tool_calls:
        result.tool_calls.extend(_call(c) for c in value.tool_calls)
    if value.tool_call_id is not None:
        result.tool_call_id = value.tool_call_id
    if origin is not None:
        result.origin.CopyFrom(
            pb.AnswerOrigin(
                kind=KINDS[origin.kind],
                route_id=origin.route_id or "",
                from_state=origin.from_state,
                to_state=origin.to_state,
                replayed=origin.replayed,
                turn_id=origin.turn_id or "",
            )
        )
    return result


def messages(history: SessionHistory) -> list[pb.Message]:
    """The retained messages of `history`, answers with their origins."""
    return [message(m, history.origins.get(m.id)) for m in history.messages]


def turn(view: TurnView) -> pb.TurnRecord:
    """A turn record as the contract sends it."""
    result = pb.TurnRecord(
        turn_id=view.turn_id,
        operation=OPERATIONS.get(view.operation or "", pb.OPERATION_UNSPECIFIED),
        outcome=OUTCOMES[view.outcome],
        user_message_id=view.user_message_id or "",
        assistant_message_id=view.assistant_message_id or "",
        kind=KINDS.get(view.kind or "", pb.TURN_KIND_UNSPECIFIED),
        route_id=view.route_id or "",
        from_state=view.from_state or "",
        to_state=view.to_state or "",
        replayed=view.replayed,
    )
    if view.failure is not None:
        _failed(result.failure, view.failure)
    if view.started_at_ms is not None:
        result.start_time.FromMilliseconds(view.started_at_ms)
    if view.finished_at_ms is not None:
        result.end_time.FromMilliseconds(view.finished_at_ms)
    if view.usage is not None:
        _usage(result.usage, view.usage)
    result.pending_tool_calls.extend(map(_pending, view.pending))
    result.unknown_tool_calls.extend(map(_pending, view.unknown))
    return result


def _call(value: ToolCall) -> pb.ToolCall:
    return pb.ToolCall(id=value.id, name=value.name, arguments=value.arguments)


def _pending(value: PendingCall) -> pb.PendingToolCall:
    return pb.PendingToolCall(tool_call_id=value.call_id, name=value.name, wait=WAITS[value.wait])


def snapshot(value: ConversationSnapshot) -> pb.Snapshot:
    """A conversation snapshot as the contract sends it."""
    return pb.Snapshot(state=value.state, allowed_events=value.events, actions=value.actions)


def session(view: SessionView) -> pb.Session:
    """Session metadata as the contract sends it."""
    return pb.Session(
        session_id=view.session_id,
        definition_id=view.definition_id,
        definition_revision=view.revision,
        history_mode=MODES[view.history_mode],
        snapshot=snapshot(view.snapshot),
        cursor=view.cursor,
        migration_blocked=None
        if view.blocked is None
        else pb.MigrationBlocked(revision=view.blocked.revision, code=view.blocked.code),
    )


def definition(value: ChatDefinition, served: Sequence[ServedRevision] = ()) -> pb.Definition:
    """The public description of a definition: no handler code, responses or model secrets;
    `served`: every revision of it the server serves."""
    spec = value.conversation
    states = [
        pb.StateInfo(
            name=name,
            transitions=[pb.Transition(event=e, target=t) for e, t in state.on.items()],
            actions=state.actions,
        )
        for name, state in spec.states.items()
    ]
    routes = [
        pb.RouteInfo(
            id=route.id,
            event=route.event,
            states=route.states or (),
            kind=KINDS[str(route.kind)],
            matcher=route.matcher.kind,
            input_text=route.matcher.input_text,
        )
        for route in spec.routes
    ]
    adapter = value.model.get("adapter", "offline")
    return pb.Definition(
        id=value.id,
        revision=value.revision,
        description=value.description,
        initial_state=spec.initial,
        states=states,
        routes=routes,
        model_adapter=adapter if isinstance(adapter, str) else "",
        served_revisions=[
            pb.ServedRevision(revision=s.revision, weight=s.weight, migrates_from=s.migrates_from)
            for s in served
        ],
    )


class EventStamper:
    """Stamps the events of one turn with their sequence in the turn and the time they were
    published (now, for an event that has none: a recorded outcome streamed again)."""

    def __init__(self, session_id: str, turn_id: str) -> None:
        self._session_id = session_id
        self._turn_id = turn_id

    def __call__(self, sequence: int, event: TurnEvent) -> pb.StreamTurnResponse:
        response = pb.StreamTurnResponse(
            session_id=self._session_id, turn_id=self._turn_id, sequence=sequence
        )
        # In place (no message copied); the time the event was published, in every view.
        response.time.FromNanoseconds(event.time_ns or time.time_ns())
        _fill(response, event)
        return response


def _fill(response: pb.StreamTurnResponse, event: TurnEvent) -> None:
    if isinstance(event, Delta):
        response.delta.text = event.text
    elif isinstance(event, ToolDelta):
        response.tool_call_delta.tool_call_id = event.call_id
        response.tool_call_delta.arguments_delta = event.arguments
    elif isinstance(event, ToolStarted):
        response.tool_call_started.tool_call_id = event.call_id
        response.tool_call_started.name = event.name
        response.tool_call_started.wait = WAITS[event.wait]
    elif isinstance(event, ToolEnded):
        ended = response.tool_call_ended
        ended.tool_call_id = event.call_id
        ended.arguments = event.arguments
        ended.wait = WAITS[event.wait]
    elif isinstance(event, ToolRan):
        ran = response.tool_call_result
        ran.tool_call_id = event.call_id
        ran.content = event.content
        ran.error_type = event.error_type or ""
        ran.message_id = event.message_id
    elif isinstance(event, Started):
        response.started.operation = OPERATIONS[event.operation]
        response.started.user_message_id = event.user_message_id or ""
        response.started.duplicate = event.duplicate
        response.started.assistant_message_id = event.assistant_message_id or ""
    elif isinstance(event, Decided):
        decision = response.decision
        decision.kind = KINDS[event.kind]
        decision.route_id = event.route_id or ""
        decision.from_state = event.from_state
        decision.to_state = event.to_state
        decision.replayed = event.replayed
    elif isinstance(event, Completed):
        done = response.completed
        done.assistant_message_id = event.assistant_message_id
        done.content = event.content
        done.snapshot.CopyFrom(snapshot(event.snapshot))
        done.cursor = event.cursor
        if event.usage is not None:
            _usage(done.usage, event.usage)
        done.finish_reason = event.finish_reason
        if event.tool_calls:
            done.tool_calls.extend(map(_call, event.tool_calls))
        if event.pending:
            done.pending_tool_calls.extend(map(_pending, event.pending))
    elif isinstance(event, Failed):
        _failed(response.failed, event)


def _failed(into: pb.TurnFailed, event: Failed) -> None:
    into.code = event.code
    into.message = event.message
    into.retryable = event.retryable
    into.route_id = event.route_id or ""


def _usage(into: pb.Usage, usage: Usage) -> None:
    into.input_tokens = usage.input_tokens
    into.output_tokens = usage.output_tokens


def watch_item(session_id: str, item: WatchItem) -> pb.WatchSessionResponse:
    """One item of a session watch as the contract sends it: the session, an event of one
    of its turns (tagged with the turn id and the turn's own sequence), or a heartbeat."""
    response = pb.WatchSessionResponse()
    if isinstance(item, WatchedEvent):  # filled in place: no copy of the event
        event = response.event
        event.session_id = session_id
        event.turn_id = item.turn_id
        event.sequence = item.sequence
        event.time.FromNanoseconds(item.event.time_ns or time.time_ns())
        _fill(event, item.event)
        return response
    if isinstance(item, Heartbeat):
        response.heartbeat.time.FromMilliseconds(item.time_ms)
        return response
    response.session.CopyFrom(session(item))
    return response
