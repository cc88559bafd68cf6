"""A grpc.aio server hosting ChatService, health and reflection, with a draining stop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from agentskit.chat.v1 import chat_pb2, chat_pb2_grpc
from agentskit_chat.service import ChatService

from ._health import HealthService
from ._reflection import enable_reflection
from ._servicer import ChatServicer

log = logging.getLogger(__name__)

SERVICE_NAME: Final = chat_pb2.DESCRIPTOR.services_by_name["ChatService"].full_name
DEFAULT_MAX_REQUEST_BYTES: Final = 4 * 1024 * 1024
CLEANUP_SECONDS: Final = 5.0


@dataclass
class RunningServer:
    """A started server; `port` is the bound port (useful with port 0)."""

    server: grpc.aio.Server
    service: ChatService
    health: HealthService
    port: int

    async def drain(self, grace: float) -> None:
        """Stop taking turns, let turns in flight finish within `grace` seconds, then stop.

        Health reports NOT_SERVING first, so balancers move traffic away while in-flight
        turns finish; new turns are refused with UNAVAILABLE.
        """
        loop = asyncio.get_running_loop()
        until = loop.time() + grace
        for name in ("", SERVICE_NAME):
            await self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        self.service.begin_drain()
        try:
            await asyncio.wait_for(self.service.turns.wait_idle(), grace)
        except TimeoutError:
            log.warning("grace period over with %d turns in flight", self.service.turns.in_flight)
        await self.server.stop(max(0.0, until - loop.time()))
        try:  # Turns cut off at the end of the grace release their leases first.
            await asyncio.wait_for(self.service.turns.wait_idle(), CLEANUP_SECONDS)
        except TimeoutError:
            log.warning("leases of cancelled turns were not all released; they will lapse")
        await self.service.close()


async def start_server(
    service: ChatService,
    listen: str,
    *,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
) -> RunningServer:
    """Bind `listen` (host:port; port 0 picks a free one) and start serving."""
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[
            ("grpc.max_receive_message_length", max_request_bytes),
            ("grpc.so_reuseport", 0),
        ],
    )
    chat_pb2_grpc.add_ChatServiceServicer_to_server(ChatServicer(service), server)
    health_servicer = HealthService()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    enable_reflection(server, (SERVICE_NAME, health.SERVICE_NAME))
    port = server.add_insecure_port(listen)
    if port == 0:
        raise OSError(f"cannot listen on {listen}")
    await server.start()
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return RunningServer(server, service, health_servicer, port)
