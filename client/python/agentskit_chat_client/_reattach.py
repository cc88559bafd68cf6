"""When and how often a broken turn stream is followed again with WatchTurn."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from ._errors import ChatError

__all__ = ["ReattachPolicy"]

_TRANSPORT_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.CANCELLED,
    }
)
WATCH_BEHIND = "ERROR_REASON_WATCH_BEHIND"
TURN_IN_PROGRESS = "ERROR_REASON_TURN_IN_PROGRESS"


@dataclass(frozen=True, slots=True)
class ReattachPolicy:
    """How a client follows a turn again after its stream broke.

    The n-th attempt in a row waits ``min(max_backoff, initial_backoff * 2 ** (n - 1))``
    seconds first; an event received starts the count again. After ``attempts`` failed
    attempts in a row the last error is raised. ``ReattachPolicy(attempts=0)`` never
    reattaches.

    Attributes:
        attempts: Attempts in a row before giving up.
        initial_backoff: Seconds before the first attempt.
        max_backoff: The longest wait between attempts, in seconds.
    """

    attempts: int = 8
    initial_backoff: float = 0.1
    max_backoff: float = 2.0

    def __post_init__(self) -> None:
        if self.attempts < 0 or self.initial_backoff < 0 or self.max_backoff < 0:
            raise ValueError("attempts and backoffs must not be negative")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before attempt number ``attempt`` (1 for the first)."""
        return min(self.max_backoff, self.initial_backoff * 2.0 ** (attempt - 1))


def breaks_stream(error: ChatError) -> bool:
    """True when ``error`` ended a stream without ending the turn it follows.

    A transport failure (UNAVAILABLE: the connection closed or the server went away;
    INTERNAL or UNKNOWN without an ErrorInfo: the stream was reset; CANCELLED without an
    ErrorInfo: the server or a proxy cancelled the call, as a stopping server does with
    calls it had not begun), or a watch that fell behind. The caller's own cancellation is
    no status: it raises ``asyncio.CancelledError`` and never gets here. A status the
    server chose for the request itself (an ErrorInfo reason) is an answer, not a break,
    except UNAVAILABLE (a draining or storeless server: another may serve the reattach).
    """
    if error.reason == WATCH_BEHIND:
        return True
    if error.code not in _TRANSPORT_CODES:
        return False
    return error.reason is None or error.code == grpc.StatusCode.UNAVAILABLE
