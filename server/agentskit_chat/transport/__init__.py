"""The gRPC transport: servicer, status details, health, reflection and draining stop."""

from ._server import SERVICE_NAME, RunningServer, start_server
from ._servicer import ChatServicer
from ._status import DETAILS_KEY, DOMAIN

__all__ = ["DETAILS_KEY", "DOMAIN", "SERVICE_NAME", "ChatServicer", "RunningServer", "start_server"]
