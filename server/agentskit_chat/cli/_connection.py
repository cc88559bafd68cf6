"""How the client commands (`chat`, `test`) reach a live server: a token and TLS settings.

The token is read from a file or the environment, never from the command line, where other
users of the machine could see it in the process list.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from agentskit_chat_client import TLSConfig

TOKEN_ENV: Final = "AGENTSKIT_CHAT_TOKEN"
TOKEN_FILE_ENV: Final = "AGENTSKIT_CHAT_TOKEN_FILE"


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """What `ChatClient` needs beyond the target."""

    tls: bool | TLSConfig = False
    token: str | None = field(default=None, repr=False)


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """The token and TLS options of a command that talks to `--target`."""
    group = parser.add_argument_group("connecting to --target")
    group.add_argument(
        "--token-file",
        type=Path,
        default=os.environ.get(TOKEN_FILE_ENV),
        help=f"file holding the bearer token [env {TOKEN_FILE_ENV}; or the token itself in "
        f"{TOKEN_ENV}]",
    )
    group.add_argument("--tls", action="store_true", help="connect with TLS (system roots)")
    group.add_argument("--tls-ca", type=Path, help="CA certificates (PEM) that verify the server")
    group.add_argument("--tls-client-cert", type=Path, help="client certificate (PEM), for mTLS")
    group.add_argument("--tls-client-key", type=Path, help="client private key (PEM), for mTLS")
    group.add_argument("--tls-server-name", help="the name the server's certificate must carry")


def client_options(args: argparse.Namespace) -> ClientOptions:
    """The options `args` ask for; ValueError (naming files, never contents) when unusable."""
    return ClientOptions(tls=_tls(args), token=_token(args.token_file))


def _token(path: Path | None) -> str | None:
    if path is None:
        return os.environ.get(TOKEN_ENV) or None
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ValueError(f"token file {path}: cannot read it ({exc.strerror})") from None
    if not token:
        raise ValueError(f"token file {path}: it is empty")
    return token


def _tls(args: argparse.Namespace) -> bool | TLSConfig:
    files = (args.tls_ca, args.tls_client_cert, args.tls_client_key)
    if not args.tls and all(f is None for f in files) and args.tls_server_name is None:
        return False
    if (args.tls_client_cert is None) != (args.tls_client_key is None):
        raise ValueError("--tls-client-cert and --tls-client-key go together")
    return TLSConfig(
        root_certificates=_read(args.tls_ca),
        client_certificate=_read(args.tls_client_cert),
        client_private_key=_read(args.tls_client_key),
        server_name=args.tls_server_name,
    )


def _read(path: Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror})") from None
