"""Plain, immutable values exchanged with the chat service.

None of these types is a protobuf message: conversion to and from the wire format lives in
``agentskit_chat_client._convert``.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, TypeAlias

from ._tools import PendingToolCall, ToolApproval, ToolCall, ToolResults, ToolWait

__all__ = [
    "AnswerOrigin",
    "CancelTurnResponse",
    "Definition",
    "DisconnectMode",
    "Dispatch",
    "Edit",
    "HistoryMode",
    "Message",
    "MigrationBlocked",
    "OperationName",
    "Regenerate",
    "Retry",
    "Role",
    "RouteInfo",
    "ServedRevision",
    "Session",
    "SessionHistory",
    "Snapshot",
    "StateInfo",
    "Submit",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallEnded",
    "ToolCallStarted",
    "Transition",
    "TurnCompleted",
    "TurnDecision",
    "TurnEvent",
    "TurnFailed",
    "TurnFailure",
    "TurnKind",
    "TurnOperation",
    "TurnOutcome",
    "TurnPage",
    "TurnRecord",
    "TurnResult",
    "TurnStarted",
    "Usage",
    "WatchHeartbeat",
    "WatchItem",
]

Role: TypeAlias = Literal["user", "assistant", "system", "tool", "unspecified"]
"""Author of a message.

``"unspecified"`` is the protobuf zero value: the server never sends it for a valid message
and rejects it in requests. A role this client version does not know also decodes to it.
"""

TurnKind: TypeAlias = Literal["deterministic", "agentic", "repaired", "fallback", "unspecified"]
"""How a turn was answered.

``"deterministic"``: a route answered with a fixed response and a transition;
``"agentic"``: no route matched and the model answered; ``"repaired"``: a route declared as
repairing a conversation answered; ``"fallback"``: a route declared as a fallback answered.
``"unspecified"`` means not yet known (or a kind this client version does not know).
"""

OperationName: TypeAlias = Literal[
    "submit", "retry", "edit", "regenerate", "dispatch", "tool_results", "unspecified"
]
"""What a turn did to the history before it was resolved.

``"unspecified"`` is the protobuf zero value, never sent for a valid turn; an operation this
client version does not know also decodes to it.
"""


TurnOutcome: TypeAlias = Literal["running", "completed", "failed", "unspecified"]
"""Where a turn stands; ``"unspecified"`` for a value this client version does not know."""


class HistoryMode(enum.StrEnum):
    """Who keeps a session's messages."""

    SERVER = "server"
    """The server stores the messages; turns use submit, retry, edit and regenerate."""
    CLIENT = "client"
    """The client keeps the messages and sends them whole with each dispatch."""


class DisconnectMode(enum.StrEnum):
    """What a disconnect of the stream that started a turn does to the turn."""

    CANCEL = "cancel"
    """The turn is cancelled: nothing is committed and the turn id may run again (the
    server's default)."""
    CONTINUE = "continue"
    """The turn runs to its end without the stream and commits; the client reattaches to it
    by itself when the stream breaks, and ``watch_turn`` follows it from anywhere."""


@dataclass(frozen=True, slots=True)
class AnswerOrigin:
    """How an assistant message was produced, for redrawing a reloaded transcript's badges.

    Attributes:
        kind: The producing turn's classification.
        route_id: The route that answered; ``None`` for agentic answers.
        from_state: State before the turn.
        to_state: State after the turn.
        replayed: True when a recorded decision was replayed; known while the session
            retains the producing turn, ``False`` after that.
        turn_id: The producing turn, while the session retains it; ``None`` after that.
    """

    kind: TurnKind
    route_id: str | None
    from_state: str
    to_state: str
    replayed: bool = False
    turn_id: str | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """One entry of a conversation history.

    Attributes:
        id: Unique within the session.
        role: The author.
        content: The text.
        origin: For assistant messages read from the server (``get_session``,
            ``truncate_history``): how the turn that produced it was answered. ``None``
            otherwise, and ignored in requests.
        tool_calls: For an assistant message: the tool calls it made.
        tool_call_id: For a ``"tool"`` message: the call it answers.
    """

    id: str
    role: Role
    content: str
    origin: AnswerOrigin | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a renderer needs to draw the conversation's controls.

    Attributes:
        state: The current state.
        allowed_events: Events the current state allows, in declaration order.
        actions: Application actions declared for the current state.
    """

    state: str
    allowed_events: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Transition:
    """One allowed event of a state.

    Attributes:
        event: The event name.
        target: The state the event leads to.
    """

    event: str
    target: str


@dataclass(frozen=True, slots=True)
class StateInfo:
    """One state of a definition.

    Attributes:
        name: The state name.
        transitions: Events allowed from this state, in declaration order.
        actions: Application actions declared for this state.
    """

    name: str
    transitions: tuple[Transition, ...] = ()
    actions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RouteInfo:
    """One deterministic route of a definition, without its handler code or responses.

    Attributes:
        id: Route id, unique within the definition.
        event: The event the route fires.
        states: States the route is restricted to; empty means every state allowing the event.
        kind: How turns answered by this route are classified.
        matcher: Matcher type: ``"command"``, ``"exact"``, ``"pattern"`` or ``"handler"``.
        input_text: The input that fires the route: the command of a ``"command"``
            matcher, the phrase of an ``"exact"`` matcher; empty for the others.
    """

    id: str
    event: str
    states: tuple[str, ...]
    kind: TurnKind
    matcher: str
    input_text: str = ""


@dataclass(frozen=True, slots=True)
class ServedRevision:
    """One revision of a definition the server serves.

    Attributes:
        revision: The revision.
        weight: Its share (0-100) of new sessions, picked by a stable hash of the session
            id so every server picks the same; 0: only sessions pinned to it or created
            before get it.
        migrates_from: Older revisions whose sessions move to this one at their next turn
            (when new sessions of their id get this one and their decisions replay here).
    """

    revision: int
    weight: int
    migrates_from: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Definition:
    """The public description of one revision of a chat definition.

    Attributes:
        id: Definition id.
        revision: The revision described: the newest served one unless ``get_definition``
            asked for another. A session keeps its revision until it migrates.
        description: Human-readable description.
        initial_state: The state new sessions start in.
        states: States in declaration order.
        routes: Routes in evaluation order.
        model_adapter: Name of the model adapter that answers agentic turns.
        served_revisions: Every revision of this definition the server serves, oldest
            first, with its share of new sessions.
    """

    id: str
    revision: int
    description: str
    initial_state: str
    states: tuple[StateInfo, ...]
    routes: tuple[RouteInfo, ...]
    model_adapter: str
    served_revisions: tuple[ServedRevision, ...] = ()


@dataclass(frozen=True, slots=True)
class MigrationBlocked:
    """Why a session stayed on its revision instead of moving to a newer one.

    Attributes:
        revision: The revision it did not move to.
        code: ``"unknown_route"`` (a decision's route has no counterpart there),
            ``"unknown_state"`` (a state has none) or ``"replay"`` (its decisions do not
            replay through the newer statechart).
    """

    revision: int
    code: str


@dataclass(frozen=True, slots=True)
class Session:
    """The metadata of one session.

    Attributes:
        session_id: Session id.
        definition_id: Id of the definition the session runs.
        definition_revision: Revision of that definition; it changes when the session
            migrates to a newer one (at a turn).
        history_mode: Who keeps the messages.
        snapshot: The conversation snapshot.
        cursor: Increases by one on every stored change (a migration is one).
        migration_blocked: Set while the session could not move to the newer revision it
            should run on; it stays on its own until it can.
    """

    session_id: str
    definition_id: str
    definition_revision: int
    history_mode: HistoryMode
    snapshot: Snapshot
    cursor: int
    migration_blocked: MigrationBlocked | None = None


@dataclass(frozen=True, slots=True)
class SessionHistory:
    """A session together with its retained server-held messages.

    Attributes:
        session: The session.
        messages: The retained messages, oldest first; empty for client-held history.
    """

    session: Session
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class Usage:
    """Model token usage of an agentic turn.

    Attributes:
        input_tokens: Tokens sent to the model.
        output_tokens: Tokens the model produced.
    """

    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class _TurnEventBase:
    """Fields shared by every turn event.

    Attributes:
        session_id: The session the turn runs in.
        turn_id: The turn id of the request.
        sequence: Starts at 1 and increases by one with every event of the turn.
        time: When the server produced the event, timezone-aware in UTC.
    """

    session_id: str
    turn_id: str
    sequence: int
    time: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStarted(_TurnEventBase):
    """The first event of a turn.

    Attributes:
        operation: The operation the turn runs.
        user_message_id: The user message being resolved; ``None`` when the history has none.
        duplicate: True when the turn id already finished and the stream repeats its outcome.
        assistant_message_id: The id the answer is stored under (``TurnCompleted`` carries
            the same one); ``None`` for a repeat that committed no answer, or an older server.
    """

    operation: OperationName
    user_message_id: str | None
    duplicate: bool
    assistant_message_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnDecision(_TurnEventBase):
    """How the turn is answered.

    Attributes:
        kind: The turn's classification.
        route_id: The route that answered; ``None`` for agentic turns.
        from_state: State before the turn.
        to_state: State after the turn; equal to ``from_state`` for agentic turns.
        replayed: True when a recorded decision was replayed (retry, regenerate).
    """

    kind: TurnKind
    route_id: str | None
    from_state: str
    to_state: str
    replayed: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta(_TurnEventBase):
    """A piece of the answer, in order.

    Attributes:
        text: The next text.
    """

    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCompleted(_TurnEventBase):
    """The last event of a turn that committed.

    Attributes:
        assistant_message_id: Id of the stored assistant message.
        content: The full answer: the concatenation of every delta.
        snapshot: The conversation snapshot after the turn.
        cursor: The session cursor after the turn.
        usage: Model token usage; ``None`` for deterministic turns.
        finish_reason: Why the model stopped (such as ``"stop"`` or ``"length"``;
            ``"tool_calls"`` when the answer waits for tool results, ``"tool_approval"``
            when it waits for an approval); ``None`` for deterministic turns, repeats, and
            older servers.
        tool_calls: The tool calls of the answer.
        pending_tool_calls: The calls the answer waits on; continue it with
            ``ToolResults``.
    """

    assistant_message_id: str
    content: str
    snapshot: Snapshot
    cursor: int
    usage: Usage | None
    finish_reason: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    pending_tool_calls: tuple[PendingToolCall, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnFailed(_TurnEventBase):
    """The last event of a turn that committed nothing.

    Attributes:
        code: Stable code, e.g. ``"route_failed"``, ``"model_failed"``,
            ``"deadline_exceeded"``.
        message: A safe, human-readable message that never repeats content.
        retryable: True when the same request may succeed later.
        route_id: The route whose code failed, for ``"route_failed"``; ``None`` otherwise.

    Deltas streamed before this event were not committed: discard them.
    """

    code: str
    message: str
    retryable: bool
    route_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted(_TurnEventBase):
    """The model began a tool call; its arguments follow as ``ToolCallDelta`` events.
    ``wait`` is what its ``ToolCallEnded`` will say (``None`` from older servers)."""

    tool_call_id: str
    name: str
    wait: ToolWait | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta(_TurnEventBase):
    """The next piece of a tool call's arguments (JSON text)."""

    tool_call_id: str
    arguments_delta: str = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEnded(_TurnEventBase):
    """A tool call is complete.

    Attributes:
        arguments: The whole arguments, JSON text.
        wait: ``"result"`` when the client runs the tool and sends its result,
            ``"approval"`` when the call needs an approve/deny decision first,
            ``"server"`` for a server tool: the service runs it, and a
            ``ToolCallResult`` follows.
    """

    tool_call_id: str
    arguments: str = field(repr=False)
    wait: ToolWait | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallResult(_TurnEventBase):
    """The service ran a server tool call within the turn; the model reads its result next.

    Attributes:
        content: The tool's result, or for a failed call an explanation for the model.
        error_type: Why the call failed (``"timeout"``, ``"tool_error"``, ...), or
            ``None`` when it succeeded.
        message_id: The tool message holding the result in a server-held history.
    """

    tool_call_id: str
    content: str = field(repr=False)
    error_type: str | None = None
    message_id: str | None = None


TurnEvent: TypeAlias = (
    TurnStarted
    | TurnDecision
    | TextDelta
    | ToolCallStarted
    | ToolCallDelta
    | ToolCallEnded
    | ToolCallResult
    | TurnCompleted
    | TurnFailed
)
"""One event of a turn stream."""


@dataclass(frozen=True, slots=True)
class Submit:
    """Append a new user message to a server-held history and resolve it.

    Attributes:
        content: The message text.
        message_id: Id for the new message; the server chooses one when ``None``.
    """

    content: str
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Retry:
    """Send a user message of a server-held history again.

    Messages after it are dropped; a recorded route decision is replayed.

    Attributes:
        message_id: The user message to retry; the last user message when ``None``.
    """

    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Edit:
    """Change a user message of a server-held history, drop later messages and resolve it.

    Attributes:
        message_id: The user message to change.
        content: Its new text.
    """

    message_id: str
    content: str


@dataclass(frozen=True, slots=True)
class Regenerate:
    """Drop an assistant answer of a server-held history and answer its user message again.

    Attributes:
        message_id: The assistant message to replace; the last assistant message when
            ``None``.
    """

    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Dispatch:
    """Resolve the last user message of a client-held history.

    Attributes:
        messages: The full retained history, oldest first; stored as a tuple. A history
            that ends with ``"tool"`` messages continues an answer waiting for tool results.
        approvals: Decisions on the calls of the last answer that wait for approval.
    """

    messages: Sequence[Message]
    approvals: Sequence[ToolApproval] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "approvals", tuple(self.approvals))


TurnOperation: TypeAlias = Submit | Retry | Edit | Regenerate | Dispatch | ToolResults
"""What a turn does to the history before it is resolved."""


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The outcome of a whole turn stream, as collected by ``ChatClient.run_turn``.

    Attributes:
        turn_id: The turn id the request was sent with.
        started: The ``TurnStarted`` event, if received.
        decision: The ``TurnDecision`` event, if received.
        text: The concatenated text of every ``TextDelta``.
        completed: The ``TurnCompleted`` event when the turn committed.
        failed: The ``TurnFailed`` event when the turn committed nothing.
        events: Every event in the order received.
    """

    turn_id: str
    started: TurnStarted | None = None
    decision: TurnDecision | None = None
    text: str = ""
    completed: TurnCompleted | None = None
    failed: TurnFailed | None = None
    events: tuple[TurnEvent, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """True when the turn committed (a ``TurnCompleted`` event was received)."""
        return self.completed is not None

    @property
    def pending_tool_calls(self) -> tuple[PendingToolCall, ...]:
        """The tool calls the committed answer waits on; empty when it waits for none."""
        return () if self.completed is None else self.completed.pending_tool_calls


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """The content-free record of one turn a session retains.

    Attributes:
        turn_id: The turn id.
        operation: The operation the turn ran.
        outcome: ``"running"``, ``"completed"`` or ``"failed"``.
        user_message_id: The user message the turn resolved, if known.
        assistant_message_id: The committed answer, for completed turns.
        kind: The classification; ``"unspecified"`` while running or when the turn failed
            before it was classified.
        route_id: The route that answered (or whose code failed).
        from_state: State before the turn, if known.
        to_state: State after the turn, if known.
        replayed: True when a recorded decision was replayed.
        failure: For failed turns: the code, message and retryable its stream ended with.
        start_time: When the turn started, if known.
        end_time: When it finished; ``None`` while running.
        usage: Model token usage of a completed agentic turn.
        pending_tool_calls: The calls a completed answer waits on (ids and names only).
        unknown_tool_calls: The server tool calls of a failed turn whose outcome is unknown
            (ids and names only): they were running when the server running the turn
            stopped (``interrupted``) or its deadline passed. Each may or may not have had
            its effect; the service never runs them again.
    """

    turn_id: str
    operation: OperationName
    outcome: TurnOutcome
    user_message_id: str | None = None
    assistant_message_id: str | None = None
    kind: TurnKind = "unspecified"
    route_id: str | None = None
    from_state: str | None = None
    to_state: str | None = None
    replayed: bool = False
    failure: TurnFailure | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    usage: Usage | None = None
    pending_tool_calls: tuple[PendingToolCall, ...] = ()
    unknown_tool_calls: tuple[PendingToolCall, ...] = ()


@dataclass(frozen=True, slots=True)
class TurnFailure:
    """How a recorded turn failed.

    Attributes:
        code: Stable code, as in ``TurnFailed``.
        message: The safe message its stream ended with.
        retryable: True when the same request may succeed later under a new turn id.
        route_id: The route whose code failed, for ``"route_failed"``.
    """

    code: str
    message: str
    retryable: bool
    route_id: str | None = None


@dataclass(frozen=True, slots=True)
class TurnPage:
    """One page of a session's retained turns, newest first.

    Attributes:
        turns: The turns of this page.
        next_page_token: Pass to ``list_turns`` for the next page; ``None`` on the last.
    """

    turns: tuple[TurnRecord, ...]
    next_page_token: str | None


@dataclass(frozen=True, slots=True)
class CancelTurnResponse:
    """What ``ChatClient.cancel_turn`` did.

    Attributes:
        cancelled: True when the turn was running and this call stopped it (its streams end
            with a ``TurnFailed`` of code ``"cancelled"``); False when it was not running
            (finished, cancelled already, or never ran) and nothing changed.
        turn: The retained record when the turn id finished before; ``None`` otherwise.
    """

    cancelled: bool
    turn: TurnRecord | None = None


@dataclass(frozen=True, slots=True)
class WatchHeartbeat:
    """Nothing happened on a watched session for a while (sent every 15 s of silence).

    Attributes:
        time: When the server sent it, timezone-aware in UTC.
    """

    time: datetime


WatchItem: TypeAlias = Session | TurnEvent | WatchHeartbeat
"""One item of ``ChatClient.watch_session``: the session (first, and after every stored
change), an event of one of its turns (its ``turn_id`` says which), or a heartbeat."""
