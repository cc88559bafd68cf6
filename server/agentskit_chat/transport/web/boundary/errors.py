"""Service errors as Connect errors: the same code, ErrorInfo and RetryInfo as over gRPC."""

from __future__ import annotations

from typing import Final

import grpc
from connectrpc.code import Code
from connectrpc.errors import ConnectError, ErrorDetail

# connectrpc carries details in its own protobuf runtime's Any; the bytes are google's.
from protobuf.wkt.google.protobuf.any_pb import Any as ConnectAny

from agentskit_chat.service import ServiceError
from agentskit_chat.transport._status import CODES, error_details

CONNECT_CODES: Final[dict[grpc.StatusCode, Code]] = {
    grpc_code: Code.CANCELED if grpc_code is grpc.StatusCode.CANCELLED else Code[grpc_code.name]
    for grpc_code in grpc.StatusCode
    if grpc_code is not grpc.StatusCode.OK
}


def connect_error(error: ServiceError) -> ConnectError:
    """The Connect error of `error`: its code, message and details, as gRPC sends them."""
    details = [
        ErrorDetail(ConnectAny(type_url=detail.type_url, value=detail.value))
        for detail in error_details(error)
    ]
    return ConnectError(CONNECT_CODES[CODES[error.reason]], error.message, details)


def internal_error() -> ConnectError:
    """The error of an unexpected failure, naming nothing of it."""
    return ConnectError(Code.INTERNAL, "internal error")
