"""Service errors as gRPC statuses with google.rpc.ErrorInfo details."""

from __future__ import annotations

from typing import Final, NoReturn

import grpc
from google.protobuf.any_pb2 import Any as AnyMessage
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

from agentskit_chat.service import Reason, ServiceError

DOMAIN: Final = "chat.agentskit.dev"
DETAILS_KEY: Final = "grpc-status-details-bin"
RETRY_AFTER_KEY: Final = "retry_after_ms"

CODES: Final = {
    Reason.INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    Reason.DEFINITION_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Reason.SESSION_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Reason.TURN_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Reason.SESSION_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    Reason.SESSION_BUSY: grpc.StatusCode.ABORTED,
    Reason.TURN_IN_PROGRESS: grpc.StatusCode.ABORTED,
    Reason.CONFLICT: grpc.StatusCode.ABORTED,
    Reason.REVISION_MISMATCH: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.SESSION_CORRUPT: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.HISTORY_MISMATCH: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.LIMIT_EXCEEDED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Reason.SHUTTING_DOWN: grpc.StatusCode.UNAVAILABLE,
    Reason.STORE_UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    Reason.DEADLINE_EXCEEDED: grpc.StatusCode.DEADLINE_EXCEEDED,
    Reason.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    Reason.RATE_LIMITED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Reason.WATCH_BEHIND: grpc.StatusCode.ABORTED,
    Reason.TOOL_CALL_UNKNOWN: grpc.StatusCode.INVALID_ARGUMENT,
    Reason.NO_PENDING_TOOL_CALLS: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.TOOL_CALLS_UNANSWERED: grpc.StatusCode.INVALID_ARGUMENT,
}


def status_details(code: grpc.StatusCode, error: ServiceError) -> bytes:
    """The serialized google.rpc.Status for `error`, carrying its `error_details`."""
    status = status_pb2.Status(
        code=code.value[0], message=error.message, details=error_details(error)
    )
    data: bytes = status.SerializeToString()
    return data


def error_details(error: ServiceError) -> list[AnyMessage]:
    """An ErrorInfo, and a RetryInfo when the error says how long to wait (metadata
    `retry_after_ms`, kept for older clients): the details every transport sends."""
    info = error_details_pb2.ErrorInfo(
        reason=str(error.reason), domain=DOMAIN, metadata=dict(error.metadata)
    )
    details = [_pack(info)]
    retry_after_ms = error.metadata.get(RETRY_AFTER_KEY)
    if retry_after_ms is not None:
        delay = Duration()
        delay.FromMilliseconds(int(retry_after_ms))
        details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    return details


def _pack(message: Message) -> AnyMessage:
    detail = AnyMessage()
    detail.Pack(message)
    return detail


async def abort(context: grpc.aio.ServicerContext[object, object], error: ServiceError) -> NoReturn:
    """End the call with the status of `error`."""
    code = CODES[error.reason]
    await context.abort(
        code, error.message, trailing_metadata=((DETAILS_KEY, status_details(code, error)),)
    )
    raise AssertionError("unreachable")  # pragma: no cover


async def abort_internal(context: grpc.aio.ServicerContext[object, object]) -> NoReturn:
    """End the call after an unexpected failure, naming nothing of it."""
    await context.abort(grpc.StatusCode.INTERNAL, "internal error")
    raise AssertionError("unreachable")  # pragma: no cover
