"""Requests, views and turn events of the application service (no protobuf here)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from agentskit_chat.conversation import (
    ConversationSnapshot,
    Message,
    MigrationBlock,
    PendingCall,
    ToolCall,
)
from agentskit_chat.models import NO_SAMPLING, NO_TOOLS, Sampling, ToolOptions
from agentskit_chat.storage import HistoryMode


@dataclass(frozen=True, slots=True)
class Submit:
    """Append a user message and resolve it."""

    content: str = field(repr=False)
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Retry:
    """Send a user message (the last one when None) again; later messages are dropped."""

    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Edit:
    """Change a user message, drop later messages and resolve it."""

    message_id: str
    content: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class Regenerate:
    """Drop an assistant message (the last one when None) and answer again."""

    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Approval:
    """A decision on a tool call that waits for approval."""

    call_id: str
    approved: bool
    reason: str = field(default="", repr=False)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The output of a tool call the last answer waits on."""

    call_id: str
    content: str = field(repr=False)
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Dispatch:
    """Resolve the last user message of a client-held history, or continue the last
    answer when the history ends with results of its pending tool calls."""

    messages: tuple[Message, ...] = field(repr=False)
    approvals: tuple[Approval, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolResults:
    """Continue the last answer of a server-held history with its tool calls' results."""

    results: tuple[ToolResult, ...] = ()
    approvals: tuple[Approval, ...] = ()


Operation = Submit | Retry | Edit | Regenerate | Dispatch | ToolResults

OPERATION_NAMES: dict[type[Operation], str] = {
    Submit: "submit",
    Retry: "retry",
    Edit: "edit",
    Regenerate: "regenerate",
    Dispatch: "dispatch",
    ToolResults: "tool_results",
}


class DisconnectMode(StrEnum):
    """What the end of the stream that started a turn does to the turn."""

    CANCEL = "cancel"
    """The turn is cancelled: nothing is committed, the lease is released."""
    CONTINUE = "continue"
    """The turn runs to its end (within the turn timeout) and commits."""


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """One turn of one session; `turn_id` is the client's idempotency key."""

    session_id: str
    turn_id: str
    operation: Operation
    expected_cursor: int | None = None
    """Run only while the session cursor equals this; a finished turn id repeats anyway."""
    on_disconnect: DisconnectMode = DisconnectMode.CANCEL
    """What closing the turn's stream before its end does to the turn."""
    sampling: Sampling = NO_SAMPLING
    """Sampling settings for the model of an agentic turn (already within the server's caps)."""
    tools: ToolOptions = NO_TOOLS
    """The tools the model may call in this turn (already within the server's limits)."""

    @property
    def operation_name(self) -> str:
        """`submit`, `retry`, `edit`, `regenerate`, `dispatch` or `tool_results`."""
        return OPERATION_NAMES[type(self.operation)]


@dataclass(frozen=True, slots=True)
class SessionView:
    """A session's metadata as clients see it."""

    session_id: str
    definition_id: str
    revision: int
    history_mode: HistoryMode
    snapshot: ConversationSnapshot
    cursor: int
    blocked: MigrationBlock | None = None
    """Why the session stayed on its revision when it should have moved; None otherwise."""


@dataclass(frozen=True, slots=True)
class ServedRevision:
    """One served revision of a definition, as clients see it."""

    revision: int
    weight: int
    """Its weight for new sessions (0-100)."""
    migrates_from: tuple[int, ...] = ()
    """Older revisions whose sessions move to it."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Model token counts of an agentic turn."""

    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class Started:
    """The turn holds the lease (or repeats a finished turn when `duplicate`)."""

    operation: str
    user_message_id: str | None
    duplicate: bool = False
    assistant_message_id: str | None = None
    """The id the answer will be stored under (`Completed` carries the same one)."""
    time_ns: int = field(default=0, compare=False, repr=False)
    """When the event was published (ns since the epoch; 0 until then): every view of it
    carries this one time."""


@dataclass(frozen=True, slots=True)
class Decided:
    """How the turn is answered."""

    kind: str
    route_id: str | None
    from_state: str
    to_state: str
    replayed: bool
    time_ns: int = field(default=0, compare=False, repr=False)
    """When the event was published (ns since the epoch; 0 until then): every view of it
    carries this one time."""


@dataclass(frozen=True, slots=True)
class Delta:
    """The next piece of the answer."""

    text: str = field(repr=False)
    time_ns: int = field(default=0, compare=False, repr=False)
    """When the event was published (ns since the epoch; 0 until then): every view of it
    carries this one time."""


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """The model started calling a tool; `wait` is what it will wait for (its ToolEnded's)."""

    call_id: str
    name: str
    wait: str = "result"
    time_ns: int = field(default=0, compare=False, repr=False)
    """When the event was published (ns since the epoch; 0 until then): every view of it
    carries this one time."""


@dataclass(frozen=True, slots=True)
class ToolDelta:
    """The next piece of a started call's arguments."""

    call_id: str
    arguments: str = field(repr=False)
    time_ns: int = field(default=0, compare=False, repr=False)
    """When the event was published (ns since the epoch; 0 until then): every view of it
    carries this one time."""


@dataclass(frozen=True, slots=True)
class ToolEnded:
    """A call's arguments are complete; `wait` is what it waits for once the turn ends."""

    call_id: str
    arguments: str = field(repr=False)
    wait: str = "result"
    time_ns: int = field(default=0, compare=False, repr=False)
    """When the event was published (ns since the epoch; 0 until then): every view of it
    carries this one time."""


@dataclass(frozen=True, slots=True)
class Completed:
    """The turn committed."""

    assistant_message_id: str
    content: str = field(repr=False)
    snapshot: ConversationSnapshot = field(default=ConversationSnapshot("", (), ()))
    cursor: int = 0
    usage: Usage | None = None
    finish_reason: str = ""
    """Why the model stopped (`stop`, `length`...); empty when no model answered."""
    tool_calls: tuple[ToolCall, ...] = field(default=(), repr=False)
    """The calls of the answer."""
    pending: tuple[PendingCall, ...] = ()
    """The calls the answer waits on."""
    time_ns: int = field(default=0, compare=False, repr=False)
    """When the event was published (ns since the epoch; 0 until then): every view of it
    carries this one time."""


@dataclass(frozen=True, slots=True)
class Failed:
    """The turn committed nothing."""

    code: str
    message: str
    retryable: bool
    route_id: str | None = None
    """The route whose code failed, for `route_failed`."""
    time_ns: int = field(default=0, compare=False, repr=False)
    """When the event was published (ns since the epoch; 0 until then): every view of it
    carries this one time."""


@dataclass(frozen=True, slots=True)
class ToolRan:
    """The service ran a server tool call: its result, as the model reads it next."""

    call_id: str
    content: str = field(repr=False)
    error_type: str | None = None
    """What went wrong (`timeout`, `tool_error`, ...) when the call failed; `content` then
    explains it to the model."""
    message_id: str = ""
    """The tool message holding the result in the history."""
    time_ns: int = field(default=0, compare=False, repr=False)
    """When the event was published (ns since the epoch; 0 until then): every view of it
    carries this one time."""


TurnEvent = (
    Started | Decided | Delta | ToolStarted | ToolDelta | ToolEnded | ToolRan | Completed | Failed
)


@dataclass(frozen=True, slots=True)
class TurnView:
    """The content-free record of one turn the session retains."""

    turn_id: str
    operation: str | None
    """None for a running turn recorded by an older server."""
    outcome: str
    """`running`, `completed` or `failed`."""
    user_message_id: str | None = None
    assistant_message_id: str | None = None
    kind: str | None = None
    route_id: str | None = None
    from_state: str | None = None
    to_state: str | None = None
    replayed: bool = False
    failure: Failed | None = None
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    usage: Usage | None = None
    pending: tuple[PendingCall, ...] = ()
    """The tool calls a completed turn's answer waits on."""
    unknown: tuple[PendingCall, ...] = ()
    """The server tool calls a failed turn stopped while they ran (its process stopped, or
    its deadline passed): their outcome is unknown."""


@dataclass(frozen=True, slots=True)
class Claim:
    """A turn claimed its session's lease (or, without one, committed its only write):
    which run of the turn it is, and where."""

    holder: str
    """The lease holder: the process running the turn."""
    started_at_ms: int
    """When the lease was claimed; tells this run of the turn id apart from others."""
    client_held: bool
    """The session's history is client-held: the turn's text is stored only sealed."""
    leased: bool = True
    """False for a turn a declared route answered with one write: it is already committed,
    and nobody can signal it."""


@dataclass(frozen=True, slots=True)
class CancelOutcome:
    """What a cancel did: `cancelled` when the turn was running and is stopped now; else
    the retained turn (when the id finished before)."""

    cancelled: bool
    turn: TurnView | None = None


@dataclass(frozen=True, slots=True)
class TurnPage:
    """One page of a session's retained turns, newest first."""

    turns: tuple[TurnView, ...]
    next_page_token: str | None


@dataclass(frozen=True, slots=True)
class AnswerOrigin:
    """How an assistant message of a server-held history was produced."""

    kind: str
    route_id: str | None
    from_state: str
    to_state: str
    replayed: bool = False
    """Known while the producing turn is retained."""
    turn_id: str | None = None


@dataclass(frozen=True, slots=True)
class SessionHistory:
    """A session with its server-held messages, and the origin of each assistant message."""

    session: SessionView
    messages: tuple[Message, ...] = field(repr=False)
    origins: Mapping[str, AnswerOrigin] = field(default_factory=dict)
    """By assistant message id."""
