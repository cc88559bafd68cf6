"""The application service: sessions, the turn lifecycle, leases, idempotent turns, limits."""

from ._catalog import Catalog, CatalogChanges, CatalogRefusedError
from ._errors import Reason, ServiceError, invalid, limit_exceeded
from ._limits import Limits
from ._observer import (
    NO_SCOPE,
    ModelCallReport,
    NoObserver,
    NoScope,
    TurnObserver,
    TurnReport,
    TurnScope,
    TurnTracer,
)
from ._service import ChatService
from ._types import (
    Completed,
    Decided,
    Delta,
    Dispatch,
    Edit,
    Failed,
    Operation,
    Regenerate,
    Retry,
    SessionView,
    Started,
    Submit,
    TurnEvent,
    TurnRequest,
    Usage,
)

__all__ = [
    "NO_SCOPE",
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
    "NoScope",
    "Operation",
    "Reason",
    "Regenerate",
    "Retry",
    "ServiceError",
    "SessionView",
    "Started",
    "Submit",
    "TurnEvent",
    "TurnObserver",
    "TurnReport",
    "TurnRequest",
    "TurnScope",
    "TurnTracer",
    "Usage",
    "invalid",
    "limit_exceeded",
]
