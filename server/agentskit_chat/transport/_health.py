"""The standard health service, with `List` as well as `Check` and `Watch`."""

from __future__ import annotations

from typing import Any, Final

import grpc
from google.protobuf.message import Message
from grpc_health.v1 import health, health_pb2

# The typing stubs of grpcio-health-checking predate `List`; the generated module has it.
_LIST_RESPONSE: Final[Any] = health_pb2.HealthListResponse  # type: ignore[attr-defined]


class HealthService(health.aio.HealthServicer):
    """grpcio's health servicer, which leaves `List` unimplemented, plus `List`."""

    def __init__(self) -> None:
        super().__init__()
        self._statuses: dict[str, int] = {"": health_pb2.HealthCheckResponse.SERVING}

    async def set(self, service: str, status: int) -> None:
        """Set the status of `service` (the server as a whole when empty)."""
        self._statuses[service] = status
        await super().set(service, status)

    def status(self, service: str = "") -> int:
        """The status of `service` (the server as a whole when empty); SERVICE_UNKNOWN when
        it was never set."""
        return self._statuses.get(service, health_pb2.HealthCheckResponse.SERVICE_UNKNOWN)

    async def List(  # noqa: N802 (the gRPC method name)
        self, request: Message, context: grpc.aio.ServicerContext[object, object]
    ) -> Message:
        """The status of every service the server reports on."""
        response: Message = _LIST_RESPONSE(
            statuses={
                name: health_pb2.HealthCheckResponse(status=status)
                for name, status in self._statuses.items()
            }
        )
        return response
