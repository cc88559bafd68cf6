"""Service errors: a stable reason, a safe message, and metadata that never holds input."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


class Reason(StrEnum):
    """Why a request was refused; the names match the contract's ErrorReason values."""

    INVALID_ARGUMENT = "ERROR_REASON_INVALID_ARGUMENT"
    DEFINITION_NOT_FOUND = "ERROR_REASON_DEFINITION_NOT_FOUND"
    SESSION_NOT_FOUND = "ERROR_REASON_SESSION_NOT_FOUND"
    SESSION_EXISTS = "ERROR_REASON_SESSION_EXISTS"
    SESSION_BUSY = "ERROR_REASON_SESSION_BUSY"
    TURN_IN_PROGRESS = "ERROR_REASON_TURN_IN_PROGRESS"
    CONFLICT = "ERROR_REASON_CONFLICT"
    REVISION_MISMATCH = "ERROR_REASON_REVISION_MISMATCH"
    SESSION_CORRUPT = "ERROR_REASON_SESSION_CORRUPT"
    HISTORY_MISMATCH = "ERROR_REASON_HISTORY_MISMATCH"
    LIMIT_EXCEEDED = "ERROR_REASON_LIMIT_EXCEEDED"
    SHUTTING_DOWN = "ERROR_REASON_SHUTTING_DOWN"
    STORE_UNAVAILABLE = "ERROR_REASON_STORE_UNAVAILABLE"
    DEADLINE_EXCEEDED = "ERROR_REASON_DEADLINE_EXCEEDED"
    TURN_NOT_FOUND = "ERROR_REASON_TURN_NOT_FOUND"
    UNAUTHENTICATED = "ERROR_REASON_UNAUTHENTICATED"
    RATE_LIMITED = "ERROR_REASON_RATE_LIMITED"
    WATCH_BEHIND = "ERROR_REASON_WATCH_BEHIND"
    TOOL_CALL_UNKNOWN = "ERROR_REASON_TOOL_CALL_UNKNOWN"
    NO_PENDING_TOOL_CALLS = "ERROR_REASON_NO_PENDING_TOOL_CALLS"
    TOOL_CALLS_UNANSWERED = "ERROR_REASON_TOOL_CALLS_UNANSWERED"


class ServiceError(Exception):
    """A refused request. `message` is fixed text written here, never request content."""

    def __init__(self, reason: Reason, message: str, **metadata: str | int) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.metadata: Mapping[str, str] = MappingProxyType(
            {key: str(value) for key, value in metadata.items()}
        )


def invalid(field: str, message: str) -> ServiceError:
    """A malformed request field."""
    return ServiceError(Reason.INVALID_ARGUMENT, message, field=field)


def conflict(cursor: int) -> ServiceError:
    """The session's cursor is not the one the request expected; metadata holds the current."""
    return ServiceError(
        Reason.CONFLICT, "the session changed since the expected cursor", cursor=cursor
    )


def limit_exceeded(limit: str, maximum: int, message: str) -> ServiceError:
    """A size or count limit was exceeded."""
    return ServiceError(Reason.LIMIT_EXCEEDED, message, limit=limit, maximum=maximum)
