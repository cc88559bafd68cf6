"""How the client reaches the server: TLS settings and the channel they open."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import grpc
import grpc.aio

__all__ = ["TLSConfig"]


@dataclass(frozen=True, slots=True)
class TLSConfig:
    """TLS settings of a connection; all PEM bytes.

    ``TLSConfig()`` verifies the server against the system's root certificates.
    """

    root_certificates: bytes | None = field(default=None, repr=False)
    """CA certificates that verify the server; ``None`` uses the system's roots."""
    client_certificate: bytes | None = field(default=None, repr=False)
    """The client's certificate chain, for servers that require mTLS."""
    client_private_key: bytes | None = field(default=None, repr=False)
    """The private key of ``client_certificate``."""
    server_name: str | None = None
    """The name to verify the server's certificate against, when it is not the target host."""

    def __post_init__(self) -> None:
        if (self.client_certificate is None) != (self.client_private_key is None):
            raise ValueError("client_certificate and client_private_key go together")


def open_channel(
    target: str,
    tls: bool | TLSConfig,
    options: Sequence[tuple[str, str | int]] = (),
) -> grpc.aio.Channel:
    """A channel to `target`: plaintext when `tls` is False, otherwise TLS."""
    if tls is False:
        return grpc.aio.insecure_channel(target, options=options)
    config = TLSConfig() if tls is True else tls
    credentials = grpc.ssl_channel_credentials(
        root_certificates=config.root_certificates,
        private_key=config.client_private_key,
        certificate_chain=config.client_certificate,
    )
    if config.server_name is not None:
        options = (*options, ("grpc.ssl_target_name_override", config.server_name))
    return grpc.aio.secure_channel(target, credentials, options=options)


def bearer(token: str) -> tuple[str, str]:
    """The metadata entry that authenticates a call with `token`."""
    if not token or any(c in token for c in " \r\n\t"):
        raise ValueError("token must be a non-empty string without whitespace")
    return ("authorization", f"Bearer {token}")
