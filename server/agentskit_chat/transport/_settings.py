"""What both listeners share: the bounds on what one client can hold open.

The gRPC listener (`_server`) and the HTTP listener (`web._listener`) each read these; neither
imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

HANDSHAKE_SECONDS: Final = 5.0
"""How long a new connection has to finish its handshake (TLS, then the HTTP/2 preface and
settings; on the HTTP listener, up to the first request's headers) before it is closed."""


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What one client can hold open; past a limit gRPC itself refuses or closes."""

    max_connections: int = 1024
    """Open connections; one more is closed during its handshake (clients see UNAVAILABLE)."""
    max_streams_per_connection: int = 100
    """Calls in flight on one connection; further calls wait until one ends."""
    max_idle_seconds: float = 300.0
    """A connection without calls for this long is closed (GOAWAY; clients reconnect)."""
    handshake_seconds: float = HANDSHAKE_SECONDS
    """A connection that has not finished its handshake this long after it was accepted is
    closed, so sockets that never speak do not hold places under `max_connections`."""

    def __post_init__(self) -> None:
        if min(self.max_connections, self.max_streams_per_connection) < 1:
            raise ValueError("connection and stream limits must be at least 1")
        if self.max_idle_seconds <= 0:
            raise ValueError("the idle connection limit must be positive")
        if self.handshake_seconds <= 0:
            raise ValueError("the handshake timeout must be positive")

    def options(self) -> list[tuple[str, int]]:
        """The grpc core channel arguments."""
        return [
            ("grpc.max_allowed_incoming_connections", self.max_connections),
            ("grpc.max_concurrent_streams", self.max_streams_per_connection),
            ("grpc.http.overload_protection", 0),  # count open streams as clients do
            ("grpc.max_connection_idle_ms", int(self.max_idle_seconds * 1000)),
            ("grpc.server_handshake_timeout_ms", max(1, int(self.handshake_seconds * 1000))),
        ]
