"""Typed asynchronous client of the AgentsKit Chat session service.

``ChatClient`` wraps the generated gRPC stubs of ``agentskit.chat.v1`` and speaks in plain
frozen dataclasses: definitions, sessions, messages and turn events. Failed calls raise
``ChatError``, which carries the gRPC status code and the server's ``ErrorInfo`` reason.
"""

from ._client import ChatClient, Metadata, new_turn_id
from ._errors import ChatError
from ._hints import EligibleRoute, OfferedRoute, SnapshotLike, command_hints, eligible_routes
from ._types import (
    AnswerOrigin,
    Definition,
    Dispatch,
    Edit,
    HistoryMode,
    Message,
    OperationName,
    Regenerate,
    Retry,
    Role,
    RouteInfo,
    Session,
    SessionHistory,
    Snapshot,
    StateInfo,
    Submit,
    TextDelta,
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
    TurnResult,
    TurnStarted,
    Usage,
)

__all__ = [
    "AnswerOrigin",
    "ChatClient",
    "ChatError",
    "Definition",
    "Dispatch",
    "Edit",
    "HistoryMode",
    "Message",
    "Metadata",
    "OperationName",
    "Regenerate",
    "Retry",
    "Role",
    "RouteInfo",
    "Session",
    "SessionHistory",
    "Snapshot",
    "StateInfo",
    "Submit",
    "TextDelta",
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
    "new_turn_id",
]
__all__ += ["EligibleRoute", "OfferedRoute", "SnapshotLike", "command_hints", "eligible_routes"]
