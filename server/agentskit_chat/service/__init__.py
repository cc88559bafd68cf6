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
    "ANONYMOUS",
    "DEFAULT_TENANT",
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
    "Principal",
    "Rate",
    "RateLimiter",
    "RateLimits",
    "Rated",
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
    "act_as",
    "acting_as",
    "current_principal",
    "invalid",
    "limit_exceeded",
]
