"""What a tenant may do per second: the rate policy a principal carries and the limiter
applies (`_rates.RateLimiter`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Rate:
    """A sustained rate with a burst allowance."""

    per_second: float
    """Requests per second a tenant may keep up."""
    burst: int = 10
    """Requests a tenant may make at once after being idle."""

    def __post_init__(self) -> None:
        if not self.per_second > 0 or self.burst < 1:
            raise ValueError("a rate must be positive with a burst of at least 1")


@dataclass(frozen=True, slots=True)
class RateLimits:
    """Per-tenant limits; None leaves that kind of request unlimited."""

    turns: Rate | None = None
    """Every StreamTurn call, a repeated turn id included."""
    sessions: Rate | None = None
    """Every CreateSession call."""
