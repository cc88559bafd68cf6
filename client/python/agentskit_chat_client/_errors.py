"""The client's single exception type and its decoding from gRPC errors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from types import MappingProxyType

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

__all__ = ["STATUS_DETAILS_KEY", "ChatError", "from_rpc_error"]

STATUS_DETAILS_KEY = "grpc-status-details-bin"
"""Trailing metadata key holding a serialized ``google.rpc.Status``."""


@dataclass(frozen=True, slots=True)
class _ErrorInfo:
    reason: str | None
    domain: str | None
    metadata: dict[str, str]


class ChatError(Exception):
    """A call to the chat service failed.

    Attributes:
        code: The gRPC status code.
        message: The status message; it never repeats request content.
        reason: The ``google.rpc.ErrorInfo`` reason, one of the ``ErrorReason`` names such as
            ``"ERROR_REASON_SESSION_BUSY"``; ``None`` when the error carries no ErrorInfo
            (for example a client-side deadline or an unreachable server).
        domain: The ErrorInfo domain (``"chat.agentskit.dev"``), or ``None``.
        metadata: The ErrorInfo metadata, e.g. ``field``, ``limit``, ``cursor`` or
            ``retry_after_ms``.
        retry_delay: The ``google.rpc.RetryInfo`` delay after which a retry may succeed,
            or ``None`` when the error carries none.
    """

    code: grpc.StatusCode
    message: str
    reason: str | None
    domain: str | None
    metadata: Mapping[str, str]
    retry_delay: timedelta | None

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        reason: str | None = None,
        domain: str | None = None,
        metadata: Mapping[str, str] | None = None,
        retry_delay: timedelta | None = None,
    ) -> None:
        """Create an error from its decoded parts."""
        self.code = code
        self.message = message
        self.reason = reason
        self.domain = domain
        self.metadata = MappingProxyType(dict(metadata or {}))
        self.retry_delay = retry_delay
        super().__init__(self._summary())

    def _summary(self) -> str:
        head = self.code.name if self.reason is None else f"{self.code.name} {self.reason}"
        return f"{head}: {self.message}" if self.message else head

    @property
    def retry_after_ms(self) -> int | None:
        """The ``retry_after_ms`` metadata as an integer (else the RetryInfo delay in
        milliseconds), or ``None`` if both are absent or malformed."""
        raw = self.metadata.get("retry_after_ms")
        if raw is None:
            if self.retry_delay is None:
                return None
            return self.retry_delay // timedelta(milliseconds=1)
        try:
            value = int(raw)
        except ValueError:
            return None
        return value if value >= 0 else None

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        """Pickle by the decoded parts."""
        parts = (self.code, self.message, self.reason, self.domain, dict(self.metadata))
        return (_restore, (*parts, self.retry_delay))

    def __repr__(self) -> str:
        """Show the code, reason and message."""
        return (
            f"ChatError(code={self.code!r}, reason={self.reason!r}, domain={self.domain!r}, "
            f"message={self.message!r}, metadata={dict(self.metadata)!r})"
        )


def _restore(
    code: grpc.StatusCode,
    message: str,
    reason: str | None,
    domain: str | None,
    metadata: dict[str, str],
    retry_delay: timedelta | None = None,
) -> ChatError:
    return ChatError(
        code, message, reason=reason, domain=domain, metadata=metadata, retry_delay=retry_delay
    )


def _status_details(
    trailing_metadata: Iterable[tuple[str, str | bytes]] | None,
) -> bytes | None:
    if trailing_metadata is None:
        return None
    for key, value in trailing_metadata:
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            return value
    return None


def _decode_status(raw: bytes | None) -> tuple[str, _ErrorInfo | None, timedelta | None]:
    """Return the status message, its first ErrorInfo and its first RetryInfo delay from a
    serialized Status."""
    if raw is None:
        return "", None, None
    try:
        status = status_pb2.Status.FromString(raw)
    except DecodeError:
        return "", None, None
    found: _ErrorInfo | None = None
    delay: timedelta | None = None
    for detail in status.details:
        if found is None and detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                metadata = {str(key): str(value) for key, value in info.metadata.items()}
                found = _ErrorInfo(
                    reason=str(info.reason) or None,
                    domain=str(info.domain) or None,
                    metadata=metadata,
                )
        elif delay is None and detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            if detail.Unpack(retry) and retry.HasField("retry_delay"):
                delay = retry.retry_delay.ToTimedelta()
    return str(status.message), found, delay


def from_rpc_error(error: grpc.aio.AioRpcError) -> ChatError:
    """Translate a failed gRPC call into a ``ChatError``.

    The ``google.rpc.Status`` in the ``grpc-status-details-bin`` trailer is decoded and its
    first ``google.rpc.ErrorInfo`` detail supplies reason, domain and metadata, and its first
    ``google.rpc.RetryInfo`` the retry delay. A missing or undecodable trailer leaves those
    empty.
    """
    status_message, info, delay = _decode_status(_status_details(error.trailing_metadata()))
    message = error.details() or status_message
    if info is None:
        return ChatError(error.code(), message, retry_delay=delay)
    return ChatError(
        error.code(),
        message,
        reason=info.reason,
        domain=info.domain,
        metadata=info.metadata,
        retry_delay=delay,
    )
