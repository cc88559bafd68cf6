"""How long one HTTP/2 connection lives: keepalive pings, and a maximum age so that
long-lived client connections spread again over replicas that were added or restarted.

A gRPC client keeps one connection and sends every call over it; behind a layer-4 balancer
or a mesh that balances connections, a replica that starts later would never get calls
from clients already connected. A maximum age makes the server send GOAWAY to each
connection once it is that old (gRPC adds up to 10 % jitter so connections do not all
reconnect at once); clients open a new connection, which the balancer may send elsewhere.
Calls already running on the old connection get the grace period to finish.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MIN_CLIENT_PING_SECONDS: Final = 10.0
"""Clients may send keepalive pings this often (gRPC's default refuses more than one every
five minutes without calls, and closes the connection of a client that pings more)."""


@dataclass(frozen=True, slots=True)
class ConnectionLifetime:
    """Keepalive and maximum connection age; a value of 0 turns the age limit off."""

    keepalive_seconds: float = 60.0
    """The server pings a connection after this long without activity, so dead peers and
    connections dropped by something in between are noticed."""
    keepalive_timeout_seconds: float = 20.0
    """A ping not answered within this long closes the connection."""
    max_age_seconds: float = 300.0
    """A connection this old is asked to go away (GOAWAY); 0 keeps connections forever."""
    max_age_grace_seconds: float = 75.0
    """Calls running on a connection asked to go away get this long to finish; above the
    default turn timeout, so a turn is not cut off."""

    def __post_init__(self) -> None:
        if self.keepalive_seconds <= 0 or self.keepalive_timeout_seconds <= 0:
            raise ValueError("keepalive time and timeout must be positive")
        if self.max_age_seconds < 0 or self.max_age_grace_seconds < 0:
            raise ValueError("the connection age and its grace must not be negative")

    def options(self) -> list[tuple[str, int]]:
        """The grpc core channel arguments."""
        options = [
            ("grpc.keepalive_time_ms", _ms(self.keepalive_seconds)),
            ("grpc.keepalive_timeout_ms", _ms(self.keepalive_timeout_seconds)),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", _ms(MIN_CLIENT_PING_SECONDS)),
        ]
        if self.max_age_seconds > 0:
            options += [
                ("grpc.max_connection_age_ms", _ms(self.max_age_seconds)),
                ("grpc.max_connection_age_grace_ms", _ms(self.max_age_grace_seconds)),
            ]
        return options


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))
