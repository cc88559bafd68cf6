"""`serve` security settings: tokens, TLS, connection limits, reflection, and the rule that
an unauthenticated server listens on loopback only."""

from __future__ import annotations

import argparse
import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path

from agentskit_chat.service import Rate, RateLimits
from agentskit_chat.transport import (
    Authenticator,
    ConnectionLimits,
    ServerTls,
    TlsFiles,
)

AUTH_TOKENS_ENV = "AGENTSKIT_CHAT_AUTH_TOKENS"


def _env_path(name: str) -> Path | None:
    value = os.environ.get(f"AGENTSKIT_CHAT_{name}")
    return Path(value) if value else None


def add_security_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for authentication, TLS, connection limits and reflection."""
    connections = ConnectionLimits()
    parser.add_argument(
        "--auth-tokens",
        type=Path,
        default=_env_path("AUTH_TOKENS"),
        metavar="FILE",
        help="YAML/JSON file of SHA-256 token digests, each mapped to a tenant; every call "
        "but health then needs `authorization: Bearer TOKEN` [none: loopback only]",
    )
    parser.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve without tokens on a non-loopback address (only behind something that "
        "authenticates callers, such as a mesh)",
    )
    parser.add_argument(
        "--tls-cert", type=Path, default=_env_path("TLS_CERT"), metavar="FILE",
        help="PEM certificate chain; with --tls-key the port speaks TLS",
    )  # fmt: skip
    parser.add_argument(
        "--tls-key", type=Path, default=_env_path("TLS_KEY"), metavar="FILE",
        help="PEM private key of --tls-cert",
    )  # fmt: skip
    parser.add_argument(
        "--tls-client-ca", type=Path, default=_env_path("TLS_CLIENT_CA"), metavar="FILE",
        help="PEM CA bundle; clients must then present a certificate it signed (mTLS)",
    )  # fmt: skip
    parser.add_argument(
        "--max-connections",
        type=int,
        default=connections.max_connections,
        help="open connections; more are closed at the handshake [%(default)s]",
    )
    parser.add_argument(
        "--max-streams-per-connection",
        type=int,
        default=connections.max_streams_per_connection,
        help="calls in flight on one connection [%(default)s]",
    )
    parser.add_argument(
        "--max-connection-idle",
        type=float,
        default=connections.max_idle_seconds,
        help="seconds before a connection without calls is closed [%(default)s]",
    )
    parser.add_argument(
        "--handshake-timeout",
        type=float,
        default=connections.handshake_seconds,
        metavar="SECONDS",
        help="seconds a new connection has to finish its handshake (TLS, HTTP/2 preface; on "
        "the HTTP listener, its first request's headers) before it is closed [%(default)s]",
    )
    for kind, what in (("turns", "turns"), ("sessions", "session creations")):
        parser.add_argument(
            f"--rate-{kind}",
            type=float,
            default=None,
            metavar="PER_SECOND",
            help=f"{what} one tenant may start per second, sustained [unlimited]",
        )
        parser.add_argument(
            f"--rate-{kind}-burst",
            type=int,
            default=10,
            metavar="N",
            help=f"{what} one tenant may start at once [%(default)s]",
        )
    parser.add_argument(
        "--reflection",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="serve gRPC reflection (it needs a token like every other service) [on]",
    )


@dataclass(frozen=True, slots=True)
class SecuritySettings:
    """Resolved security settings of one `serve` run."""

    auth_tokens: Path | None = None
    insecure_no_auth: bool = False
    tls: TlsFiles | None = None
    connections: ConnectionLimits = field(default_factory=ConnectionLimits)
    reflection: bool = True
    rates: RateLimits = field(default_factory=RateLimits)


def security_from(args: argparse.Namespace) -> SecuritySettings:
    """Security settings from parsed flags; ValueError when they do not fit together."""
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ValueError("--tls-cert and --tls-key go together")
    if args.tls_client_ca is not None and args.tls_cert is None:
        raise ValueError("--tls-client-ca needs --tls-cert and --tls-key")
    tls = None
    if args.tls_cert is not None:
        tls = TlsFiles(args.tls_cert, args.tls_key, args.tls_client_ca)
    settings = SecuritySettings(
        auth_tokens=args.auth_tokens,
        insecure_no_auth=args.insecure_no_auth,
        tls=tls,
        connections=ConnectionLimits(
            max_connections=args.max_connections,
            max_streams_per_connection=args.max_streams_per_connection,
            max_idle_seconds=args.max_connection_idle,
            handshake_seconds=args.handshake_timeout,
        ),
        reflection=args.reflection,
        rates=RateLimits(
            turns=_rate(args.rate_turns, args.rate_turns_burst),
            sessions=_rate(args.rate_sessions, args.rate_sessions_burst),
        ),
    )
    check_exposure(args.listen, settings)
    http_listen: str | None = getattr(args, "http_listen", None)
    if http_listen is not None and http_listen.rpartition(":")[2].isdigit():
        # The same service, the same boundary (an address without a port is refused later).
        check_exposure(http_listen, settings)
    return settings


def _rate(per_second: float | None, burst: int) -> Rate | None:
    return None if per_second is None else Rate(per_second, burst)


def is_loopback(listen: str) -> bool:
    """Whether `listen` (host:port) binds only loopback addresses."""
    host = listen.rsplit(":", 1)[0].strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(listen: str, settings: SecuritySettings) -> None:
    """Refuse (ValueError) to serve without authentication beyond loopback."""
    if settings.auth_tokens is not None or settings.insecure_no_auth or is_loopback(listen):
        return
    raise ValueError(
        f"refusing to listen on {listen} without authentication: anyone who can reach it "
        f"could read and drive every session. Give --auth-tokens FILE (or {AUTH_TOKENS_ENV}), "
        "listen on a loopback address, or pass --insecure-no-auth when something in front "
        "of the server authenticates callers"
    )


@dataclass(frozen=True, slots=True)
class Security:
    """What `serve` built from its settings; `reload()` re-reads tokens and certificates."""

    authenticator: Authenticator | None
    tls: ServerTls | None

    def describe(self) -> str:
        """How the listener is protected, for the startup line (never a token)."""
        transport = "plaintext" if self.tls is None else "tls"
        if self.tls is not None and self.tls.files.client_ca is not None:
            transport = "mtls"
        auth = "no auth" if self.authenticator is None else "bearer tokens"
        return f"{transport}, {auth}"

    def reload(self) -> None:
        """Read the tokens file and the certificate files again (SIGHUP)."""
        if self.authenticator is not None:
            self.authenticator.reload()
        if self.tls is not None:
            self.tls.reload()


def build_security(settings: SecuritySettings) -> Security:
    """Load the tokens and certificates; TokenFileError or TlsFileError when unusable."""
    authenticator = None if settings.auth_tokens is None else Authenticator(settings.auth_tokens)
    tls = None if settings.tls is None else ServerTls(settings.tls)
    return Security(authenticator, tls)
