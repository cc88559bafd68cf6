"""Errors of the conversation core.

The hierarchy, with the stable code each carries where it has one::

    ConversationError
    ├── ConfigError                  a definition is invalid; carries every Diagnostic
    ├── InvalidHistoryError          a dispatch names malformed messages
    ├── AsyncCallbackError           an async route callback reached a synchronous dispatch
    └── SessionRecordError           a stored session record cannot be used (never partial)
        ├── MalformedRecordError     bad JSON, unknown keys, wrong types    record_malformed
        ├── UnsupportedVersionError  a format or version not read here      record_version
        ├── ForeignRecordError       another session's record              record_foreign
        ├── DefinitionMismatchError  definition id or revision differs     definition_mismatch
        ├── SealedResponseError      a sealed response does not open       record_sealed
        └── ReplayError              decisions do not replay               record_replay
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class ErrorCode(StrEnum):
    """Stable codes of definition diagnostics; tools may match on them."""

    READ_ERROR = "read_error"
    PARSE_ERROR = "parse_error"
    UNSUPPORTED_FORMAT = "unsupported_format"
    DUPLICATE_KEY = "duplicate_key"
    UNKNOWN_KEY = "unknown_key"
    MISSING_KEY = "missing_key"
    INVALID_TYPE = "invalid_type"
    INVALID_ID = "invalid_id"
    INVALID_REVISION = "invalid_revision"
    INVALID_MODEL = "invalid_model"
    DUPLICATE_DEFINITION = "duplicate_definition"
    UNKNOWN_INITIAL_STATE = "unknown_initial_state"
    EMPTY_STATE_NAME = "empty_state_name"
    NO_STATES = "no_states"
    EMPTY_EVENT = "empty_event"
    UNKNOWN_TRANSITION_TARGET = "unknown_transition_target"
    EMPTY_ACTION = "empty_action"
    DUPLICATE_ACTION = "duplicate_action"
    EMPTY_ROUTE_ID = "empty_route_id"
    DUPLICATE_ROUTE_ID = "duplicate_route_id"
    UNDECLARED_EVENT = "undeclared_event"
    UNKNOWN_ROUTE_STATE = "unknown_route_state"
    EMPTY_ROUTE_STATES = "empty_route_states"
    INVALID_KIND = "invalid_kind"
    MATCHER_COUNT = "matcher_count"
    EMPTY_COMMAND = "empty_command"
    EMPTY_EXACT = "empty_exact"
    INVALID_PATTERN = "invalid_pattern"
    INVALID_TEMPLATE = "invalid_template"
    UNKNOWN_TEMPLATE_FIELD = "unknown_template_field"
    INVALID_CALLABLE = "invalid_callable"
    INVALID_TOOL = "invalid_tool"
    UNKNOWN_ROUTE_TOOL = "unknown_route_tool"
    INVALID_ROLLOUT = "invalid_rollout"
    INVALID_MIGRATION = "invalid_migration"
    INVALID_MCP_SERVER = "invalid_mcp_server"
    LITERAL_SECRET = "literal_secret"
    UNKNOWN_MCP_SERVER = "unknown_mcp_server"
    UNUSED_MCP_SERVER = "unused_mcp_server"
    INVALID_TOOL_TIMEOUT = "invalid_tool_timeout"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem in a definition, located by file and by path inside it."""

    code: ErrorCode
    """Stable machine-readable code."""
    file: str
    """File the definition came from, or `<code>` for definitions built in Python."""
    path: str
    """Location inside the definition, e.g. `conversation.routes[2].states[0]`."""
    message: str
    """One line for a person."""

    def __str__(self) -> str:
        where = f"{self.file}: {self.path}" if self.path else self.file
        return f"{where}: {self.message} [{self.code}]"


class ConversationError(Exception):
    """Base of every error the conversation core raises."""


class ConfigError(ConversationError):
    """One or more definitions are invalid; `diagnostics` lists every problem found."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        count = len(self.diagnostics)
        lines = "\n".join(f"  {d}" for d in self.diagnostics)
        super().__init__(f"{count} definition error{'s' if count != 1 else ''}:\n{lines}")


class InvalidHistoryError(ConversationError):
    """The messages of a dispatch are malformed (empty or duplicate ids, unknown roles)."""


class AsyncCallbackError(ConversationError):
    """A route callback returned an awaitable during a synchronous dispatch."""


class SessionRecordError(ConversationError):
    """A stored session record cannot be used; nothing of it was loaded."""

    code = "record_invalid"


class MalformedRecordError(SessionRecordError):
    """The record is not valid JSON of the expected shape."""

    code = "record_malformed"


class UnsupportedVersionError(SessionRecordError):
    """The record's format or version is not one this build reads."""

    code = "record_version"


class ForeignRecordError(SessionRecordError):
    """The record belongs to another session."""

    code = "record_foreign"


class DefinitionMismatchError(SessionRecordError):
    """The record was written for another definition id or revision."""

    code = "definition_mismatch"


class SealedResponseError(SessionRecordError):
    """A sealed response in the record does not open with the deployment key."""

    code = "record_sealed"


class ReplayError(SessionRecordError):
    """The record's decisions do not replay through the definition's statechart."""

    code = "record_replay"
