"""The gRPC listener: a grpc.aio server hosting ChatService, health and reflection.

It knows nothing of the HTTP listener (`web`): both read their shared bounds from
`_settings`, and `_running` starts and drains them together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from agentskit.chat.v1 import chat_pb2, chat_pb2_grpc
from agentskit_chat.service import ChatService

from ._auth import Authenticator
from ._guard import Guard
from ._health import HealthService
from ._lifetime import ConnectionLifetime
from ._reflection import enable_reflection
from ._servicer import ChatServicer
from ._settings import HANDSHAKE_SECONDS as HANDSHAKE_SECONDS
from ._settings import ConnectionLimits as ConnectionLimits
from ._tls import ServerTls

SERVICE_NAME: Final = chat_pb2.DESCRIPTOR.services_by_name["ChatService"].full_name
DEFAULT_MAX_REQUEST_BYTES: Final = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class GrpcListener:
    """A bound, not yet started gRPC server and what it serves."""

    server: grpc.aio.Server
    servicer: ChatServicer
    health: HealthService
    port: int


def grpc_listener(
    service: ChatService,
    listen: str,
    *,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    authenticator: Authenticator | None = None,
    tls: ServerTls | None = None,
    connections: ConnectionLimits | None = None,
    lifetime: ConnectionLifetime | None = None,
    reflection_enabled: bool = True,
    reuse_port: bool = False,
) -> GrpcListener:
    """Build the gRPC server and bind `listen` (see `start_server`); OSError when it cannot."""
    limits = connections or ConnectionLimits()
    server = grpc.aio.server(
        interceptors=(Guard(authenticator), *interceptors),
        options=[
            ("grpc.max_receive_message_length", max_request_bytes),
            ("grpc.so_reuseport", 1 if reuse_port else 0),
            *limits.options(),
            *(lifetime or ConnectionLifetime()).options(),
        ],
    )
    servicer = ChatServicer(service)
    chat_pb2_grpc.add_ChatServiceServicer_to_server(servicer, server)
    health_servicer = HealthService()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if reflection_enabled:
        enable_reflection(server, (SERVICE_NAME, health.SERVICE_NAME))
    try:  # grpcio raises RuntimeError for an address it cannot bind (one in use, say)
        if tls is None:
            port = server.add_insecure_port(listen)
        else:
            port = server.add_secure_port(listen, tls.credentials())
    except RuntimeError:
        port = 0
    if port == 0:
        raise OSError(f"cannot listen on {listen}: the address is in use or not available")
    return GrpcListener(server, servicer, health_servicer, port)


async def serving(listener: GrpcListener) -> None:
    """Start `listener` and report it SERVING to health checks."""
    await listener.server.start()
    for name in ("", SERVICE_NAME):
        await listener.health.set(name, health_pb2.HealthCheckResponse.SERVING)
