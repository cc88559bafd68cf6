"""Per-tenant rate limits on turns and on session creation: token buckets, off by default."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from enum import StrEnum

from ._errors import Reason, ServiceError
from ._rate_limits import Rate, RateLimits
from ._tenancy import current_principal


class Rated(StrEnum):
    """What a bucket counts; the `limit` metadata of a RATE_LIMITED refusal."""

    TURNS = "turns"
    SESSIONS = "sessions"


class _Bucket:
    __slots__ = ("rate", "tokens", "updated")

    def __init__(self, rate: Rate, now: float) -> None:
        self.rate = rate
        self.tokens = float(rate.burst)
        self.updated = now

    def take(self, now: float) -> float:
        """0 when a token was taken, else the seconds until one is available."""
        self.tokens = min(
            float(self.rate.burst), self.tokens + (now - self.updated) * self.rate.per_second
        )
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate.per_second


def _rate(limits: RateLimits | None, kind: Rated) -> Rate | None:
    if limits is None:
        return None
    return limits.turns if kind is Rated.TURNS else limits.sessions


class RateLimiter:
    """One bucket per tenant and kind, created on the tenant's first request."""

    def __init__(
        self, limits: RateLimits | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits or RateLimits()
        self._clock = clock
        self._buckets: dict[tuple[Rated, str], _Bucket] = {}

    def check(self, kind: Rated) -> None:
        """Count one request of the current tenant; RESOURCE_EXHAUSTED when over its rate."""
        principal = current_principal()
        rate = _rate(principal.rates, kind) or _rate(self.limits, kind)
        if rate is None:
            return
        now = self._clock()
        key = (kind, principal.tenant)
        bucket = self._buckets.get(key)
        if bucket is None or bucket.rate != rate:
            bucket = self._buckets[key] = _Bucket(rate, now)
        wait = bucket.take(now)
        if wait > 0:
            raise ServiceError(
                Reason.RATE_LIMITED,
                f"too many {kind} for this tenant; retry later",
                limit=str(kind),
                retry_after_ms=max(1, math.ceil(wait * 1000)),
            )
