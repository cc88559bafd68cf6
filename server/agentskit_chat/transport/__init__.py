"""The transports: gRPC (servicer, authentication, TLS, status details, health, reflection,
a draining stop) and, in `web`, the HTTP listener for browsers (Connect and gRPC-Web)."""

from ._auth import Authenticator, TokenFileError, load_tokens, token_digest
from ._guard import Guard
from ._lifetime import ConnectionLifetime
from ._running import RunningServer, start_server
from ._server import SERVICE_NAME
from ._servicer import ChatServicer
from ._settings import ConnectionLimits
from ._status import DETAILS_KEY, DOMAIN
from ._tls import ServerTls, TlsFileError, TlsFiles

__all__ = [
    "DETAILS_KEY",
    "DOMAIN",
    "SERVICE_NAME",
    "Authenticator",
    "ChatServicer",
    "ConnectionLifetime",
    "ConnectionLimits",
    "Guard",
    "RunningServer",
    "ServerTls",
    "TlsFileError",
    "TlsFiles",
    "TokenFileError",
    "load_tokens",
    "start_server",
    "token_digest",
]
