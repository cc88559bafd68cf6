"""Requests, views and turn events of the application service (no protobuf here)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentskit_chat.conversation import ConversationSnapshot, Message
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
class Dispatch:
    """Resolve the last user message of a client-held history."""

    messages: tuple[Message, ...] = field(repr=False)


Operation = Submit | Retry | Edit | Regenerate | Dispatch

OPERATION_NAMES: dict[type[Operation], str] = {
    Submit: "submit",
    Retry: "retry",
    Edit: "edit",
    Regenerate: "regenerate",
    Dispatch: "dispatch",
}


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """One turn of one session; `turn_id` is the client's idempotency key."""

    session_id: str
    turn_id: str
    operation: Operation

    @property
    def operation_name(self) -> str:
        """`submit`, `retry`, `edit`, `regenerate` or `dispatch`."""
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


@dataclass(frozen=True, slots=True)
class Decided:
    """How the turn is answered."""

    kind: str
    route_id: str | None
    from_state: str
    to_state: str
    replayed: bool


@dataclass(frozen=True, slots=True)
class Delta:
    """The next piece of the answer."""

    text: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class Completed:
    """The turn committed."""

    assistant_message_id: str
    content: str = field(repr=False)
    snapshot: ConversationSnapshot = field(default=ConversationSnapshot("", (), ()))
    cursor: int = 0
    usage: Usage | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    """The turn committed nothing."""

    code: str
    message: str
    retryable: bool


TurnEvent = Started | Decided | Delta | Completed | Failed
