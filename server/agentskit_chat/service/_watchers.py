"""Counts of the watch streams this process serves, per session and per tenant.

Every watch (of one turn, or of a whole session) counts as one watcher of its session and
of its tenant while it is open; past a bound a new watch is refused with
RESOURCE_EXHAUSTED / LIMIT_EXCEEDED, metadata `limit` = `watchers_per_session` or
`watchers_per_tenant`. A watcher holds only its position in a turn's events, so these
bounds and the per-turn event bounds bound what watchers make the process hold.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final, TypeVar

from ._errors import limit_exceeded

K = TypeVar("K")

MAX_WATCHERS_PER_SESSION: Final = 32
MAX_WATCHERS_PER_TENANT: Final = 1024


class Watchers:
    """The open watches of this process, counted per (tenant, session) and per tenant."""

    def __init__(
        self,
        *,
        per_session: int = MAX_WATCHERS_PER_SESSION,
        per_tenant: int = MAX_WATCHERS_PER_TENANT,
    ) -> None:
        if per_session < 1 or per_tenant < 1:
            raise ValueError("watcher limits must be at least 1")
        self.per_session = per_session
        self.per_tenant = per_tenant
        self._sessions: dict[tuple[str, str], int] = {}
        self._tenants: dict[str, int] = {}

    def count(self, tenant: str, session_id: str | None = None) -> int:
        """Open watches of the tenant, or of one of its sessions."""
        if session_id is None:
            return self._tenants.get(tenant, 0)
        return self._sessions.get((tenant, session_id), 0)

    @contextmanager
    def watching(self, tenant: str, session_id: str) -> Iterator[None]:
        """Count one watch of the session for the duration of the block; raises
        LIMIT_EXCEEDED (counting nothing) when a bound is reached."""
        key = (tenant, session_id)
        if self._sessions.get(key, 0) >= self.per_session:
            raise limit_exceeded(
                "watchers_per_session",
                self.per_session,
                f"the session has {self.per_session} watchers on this server already",
            )
        if self._tenants.get(tenant, 0) >= self.per_tenant:
            raise limit_exceeded(
                "watchers_per_tenant",
                self.per_tenant,
                f"the tenant has {self.per_tenant} watchers on this server already",
            )
        self._sessions[key] = self._sessions.get(key, 0) + 1
        self._tenants[tenant] = self._tenants.get(tenant, 0) + 1
        try:
            yield
        finally:
            _drop(self._sessions, key)
            _drop(self._tenants, tenant)


def _drop(counts: dict[K, int], key: K) -> None:
    left = counts[key] - 1
    if left:
        counts[key] = left
    else:
        del counts[key]
