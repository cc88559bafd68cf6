"""The application service: sessions, the turn lifecycle, leases, idempotent turns, limits."""

from ._catalog import Catalog, CatalogChanges, CatalogRefusedError
from ._errors import Reason, ServiceError, invalid, limit_exceeded
from ._limits import Limits
from ._observer import ModelCallReport, NoObserver, TurnObserver, TurnReport
from ._service import ChatService
from ._types import (
    AnswerOrigin,
    Completed,
    Decided,
    Delta,
    Dispatch,
    Edit,
    Failed,
    Operation,
    Regenerate,
    Retry,
    SessionHistory,
    SessionView,
    Started,
    Submit,
    TurnEvent,
    TurnPage,
    TurnRequest,
    TurnView,
    Usage,
)

__all__ = [
    "AnswerOrigin",
    "Catalog",
    "CatalogChanges",
    "CatalogRefusedError",
    "ChatService",
    "Completed",
    "Decided",
    "Delta",
    "Dispatch",
    "Edit",
    "Failed",
    "Limits",
    "ModelCallReport",
    "NoObserver",
    "Operation",
    "Reason",
    "Regenerate",
    "Retry",
    "ServiceError",
    "SessionHistory",
    "SessionView",
    "Started",
    "Submit",
    "TurnEvent",
    "TurnObserver",
    "TurnPage",
    "TurnReport",
    "TurnRequest",
    "TurnView",
    "Usage",
    "invalid",
    "limit_exceeded",
]
