"""The conversation core: definitions, statechart, deterministic routes and decision replay.

Pure Python: no gRPC, storage or telemetry. Typical use::

    chat = load_definition("examples/definitions/support.yaml")
    session = create_chat_session(chat, session_id="s1", digest_key=key)
    outcome = session.dispatch_sync([Message("m1", Role.USER, "/start")])
"""

from ._builders import command_route, exact_route, handler_route, pattern_route
from ._decisions import Checkpoint, ConversationState, Decision, InputDigester
from ._definition import ChatDefinition, ConversationSpec, Route, StateSpec
from ._engine import DEFAULT_CALLBACK_TIMEOUT, initial_state, resolve, run_sync
from ._errors import (
    AsyncCallbackError,
    ConfigError,
    ConversationError,
    DefinitionMismatchError,
    Diagnostic,
    ErrorCode,
    ForeignRecordError,
    InvalidHistoryError,
    MalformedRecordError,
    ReplayError,
    SealedResponseError,
    SessionRecordError,
    UnsupportedVersionError,
)
from ._loading import SUFFIXES as DEFINITION_SUFFIXES
from ._loading import (
    canonical_document,
    define_chat,
    definition_of_document,
    is_definition_file,
    load_definition,
    load_definitions,
    load_revisions,
    parse_definition,
)
from ._matchers import normalize_exact
from ._migration import Migration
from ._observers import TraceFanout, TraceObserver
from ._outcomes import (
    ROUTE_FAILED,
    ROUTE_FAILED_MESSAGE,
    DelegateOutcome,
    FailureOutcome,
    Outcome,
    RouteOutcome,
)
from ._record import (
    MAX_RECENT_TURNS,
    Lease,
    MigrationBlock,
    PendingCall,
    RecordEncoder,
    SessionRecord,
    TerminalTurn,
    decode_session_record,
    encode_session_record,
)
from ._responses import RESULT_FIELD, RouteToolError, RouteTools, ToolResponse
from ._revisions import (
    MAX_WEIGHT,
    MigrationRefusedError,
    revision_issues,
    rollout_choice,
    served_together,
)
from ._rounds import RecordedRounds, rounds_digest
from ._schema import SCHEMA_PATH, definition_schema
from ._sealing import ResponseSealer
from ._server_tools import (
    DEFAULT_TOOL_TIMEOUT,
    HttpServerSpec,
    McpServerSpec,
    ServerToolSpec,
    StdioServerSpec,
)
from ._session import ChatSession, create_chat_session
from ._statechart import (
    Accepted,
    Rejected,
    RejectionReason,
    Statechart,
    StatechartInstance,
    compile_statechart,
    create_instance,
    transition,
)
from ._trace import TraceRecord, TurnOutcome
from ._types import ConversationSnapshot, Message, Role, RouteContext, ToolCall, TurnKind
from ._yaml import load_yaml

__all__ = [
    "DEFAULT_CALLBACK_TIMEOUT",
    "DEFAULT_TOOL_TIMEOUT",
    "DEFINITION_SUFFIXES",
    "MAX_RECENT_TURNS",
    "MAX_WEIGHT",
    "RESULT_FIELD",
    "ROUTE_FAILED",
    "ROUTE_FAILED_MESSAGE",
    "SCHEMA_PATH",
    "Accepted",
    "AsyncCallbackError",
    "ChatDefinition",
    "ChatSession",
    "Checkpoint",
    "ConfigError",
    "ConversationError",
    "ConversationSnapshot",
    "ConversationSpec",
    "ConversationState",
    "Decision",
    "DefinitionMismatchError",
    "DelegateOutcome",
    "Diagnostic",
    "ErrorCode",
    "FailureOutcome",
    "ForeignRecordError",
    "HttpServerSpec",
    "InputDigester",
    "InvalidHistoryError",
    "Lease",
    "MalformedRecordError",
    "McpServerSpec",
    "Message",
    "Migration",
    "MigrationBlock",
    "MigrationRefusedError",
    "Outcome",
    "PendingCall",
    "RecordEncoder",
    "RecordedRounds",
    "Rejected",
    "RejectionReason",
    "ReplayError",
    "ResponseSealer",
    "Role",
    "Route",
    "RouteContext",
    "RouteOutcome",
    "RouteToolError",
    "RouteTools",
    "SealedResponseError",
    "ServerToolSpec",
    "SessionRecord",
    "SessionRecordError",
    "StateSpec",
    "Statechart",
    "StatechartInstance",
    "StdioServerSpec",
    "TerminalTurn",
    "ToolCall",
    "ToolResponse",
    "TraceFanout",
    "TraceObserver",
    "TraceRecord",
    "TurnKind",
    "TurnOutcome",
    "UnsupportedVersionError",
    "canonical_document",
    "command_route",
    "compile_statechart",
    "create_chat_session",
    "create_instance",
    "decode_session_record",
    "define_chat",
    "definition_of_document",
    "definition_schema",
    "encode_session_record",
    "exact_route",
    "handler_route",
    "initial_state",
    "is_definition_file",
    "load_definition",
    "load_definitions",
    "load_revisions",
    "load_yaml",
    "normalize_exact",
    "parse_definition",
    "pattern_route",
    "resolve",
    "revision_issues",
    "rollout_choice",
    "rounds_digest",
    "run_sync",
    "served_together",
    "transition",
]
