"""Who a request acts for: the principal a transport authenticated, applied in one place.

A transport authenticates each call and runs its handler under `acting_as(principal)`.
The service reads `current_principal()` where sessions are keyed (`Records`) and where
definitions are looked up, so every operation, present or future, is scoped to the
caller's tenant without taking a tenant argument. Code that never sets a principal (the
engine used in-process, a server without authentication) acts for `ANONYMOUS`: the
default tenant, with every definition.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final

from agentskit_chat.storage import DEFAULT_TENANT

from ._rate_limits import RateLimits


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller."""

    tenant: str
    """Namespace of the caller's sessions; another tenant's sessions do not exist for it."""
    definitions: frozenset[str] | None = None
    """Definition ids the caller may see and use; None for every definition."""
    rates: RateLimits | None = None
    """The tenant's own rate limits; a kind they leave None follows the server's."""

    def may_use(self, definition_id: str) -> bool:
        """Whether the caller may see `definition_id` and its sessions."""
        return self.definitions is None or definition_id in self.definitions


ANONYMOUS: Final = Principal(DEFAULT_TENANT)

_current: ContextVar[Principal] = ContextVar("agentskit_chat_principal", default=ANONYMOUS)


def current_principal() -> Principal:
    """The principal the running request acts for."""
    return _current.get()


def act_as(principal: Principal) -> None:
    """Make `principal` the caller for the rest of the current task (one task per call)."""
    _current.set(principal)


@contextmanager
def acting_as(principal: Principal) -> Iterator[None]:
    """Run a block as `principal`."""
    token = _current.set(principal)
    try:
        yield
    finally:
        _current.reset(token)
