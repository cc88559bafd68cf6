"""The application service: sessions, the turn lifecycle, leases, idempotent turns, limits."""

from agentskit_chat.storage import DEFAULT_TENANT

from ._catalog import Catalog, CatalogChanges, CatalogRefusedError
from ._errors import Reason, ServiceError, invalid, limit_exceeded
from ._limits import Limits
from ._observer import ModelCallReport, NoObserver, TurnObserver, TurnReport
from ._rates import Rate, Rated, RateLimiter, RateLimits
from ._service import ChatService
from ._tenancy import ANONYMOUS, Principal, act_as, acting_as, current_principal
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
    "ANONYMOUS",
    "DEFAULT_TENANT",
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
    "Principal",
    "Rate",
    "RateLimiter",
    "RateLimits",
    "Rated",
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
    "Usage",
    "act_as",
    "acting_as",
    "current_principal",
    "invalid",
    "limit_exceeded",
]
