"""The Connect and gRPC-Web wire formats, spoken with httpx as a browser speaks them."""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

SERVICE = "/agentskit.chat.v1.ChatService/"
END_STREAM = 0x02
TRAILERS = 0x80


def envelope(payload: bytes, flags: int = 0) -> bytes:
    """One enveloped message: flags, big-endian length, payload."""
    return struct.pack(">BI", flags, len(payload)) + payload


def frames(body: bytes) -> list[tuple[int, bytes]]:
    """The (flags, payload) envelopes of a streamed body."""
    found = []
    while body:
        flags, size = struct.unpack(">BI", body[:5])
        found.append((flags, body[5 : 5 + size]))
        body = body[5 + size :]
    return found


@dataclass
class StreamResult:
    """A Connect stream's messages and its end-of-stream message."""

    status: int
    messages: list[dict[str, Any]]
    end: dict[str, Any]
    headers: httpx.Headers

    @property
    def error(self) -> dict[str, Any] | None:
        error: dict[str, Any] | None = self.end.get("error")
        return error


async def unary(
    http: httpx.AsyncClient, method: str, body: Mapping[str, Any], **headers: str
) -> httpx.Response:
    """A Connect unary JSON call."""
    return await http.post(
        SERVICE + method,
        content=json.dumps(body).encode(),
        headers={"content-type": "application/json", **_headers(headers)},
    )


async def stream(
    http: httpx.AsyncClient, method: str, body: Mapping[str, Any], **headers: str
) -> StreamResult:
    """A Connect server-streaming JSON call, read to its end."""
    response = await http.post(
        SERVICE + method,
        content=envelope(json.dumps(body).encode()),
        headers={"content-type": "application/connect+json", **_headers(headers)},
    )
    messages, end = [], {}
    for flags, payload in frames(response.content):
        if flags & END_STREAM:
            end = json.loads(payload)
        else:
            messages.append(json.loads(payload))
    return StreamResult(response.status_code, messages, end, response.headers)


@dataclass
class GrpcWebResult:
    """A gRPC-Web call's messages and trailers."""

    status: int
    messages: list[bytes]
    trailers: dict[str, str] = field(default_factory=dict)

    @property
    def code(self) -> int:
        return int(self.trailers.get("grpc-status", "-1"))

    def details(self) -> list[Message]:
        """The ErrorInfo and RetryInfo in `grpc-status-details-bin`."""
        raw = self.trailers.get("grpc-status-details-bin", "")
        status = status_pb2.Status.FromString(base64.b64decode(raw + "=" * (-len(raw) % 4)))
        found: list[Message] = []
        for detail in status.details:
            for kind in (error_details_pb2.ErrorInfo, error_details_pb2.RetryInfo):
                if detail.Is(kind.DESCRIPTOR):
                    message = kind()
                    detail.Unpack(message)
                    found.append(message)
        return found


async def grpc_web(
    http: httpx.AsyncClient, method: str, request: Message, **headers: str
) -> GrpcWebResult:
    """A binary gRPC-Web call, read to its trailers."""
    response = await http.post(
        SERVICE + method,
        content=envelope(request.SerializeToString()),
        headers={
            "content-type": "application/grpc-web+proto",
            "x-grpc-web": "1",
            **_headers(headers),
        },
    )
    result = GrpcWebResult(response.status_code, [])
    for key in ("grpc-status", "grpc-message", "grpc-status-details-bin"):
        if key in response.headers:  # A trailers-only response carries them as headers.
            result.trailers[key] = response.headers[key]
    for flags, payload in frames(response.content):
        if flags & TRAILERS:
            for line in payload.decode().split("\r\n"):
                if line:
                    key, _, value = line.partition(":")
                    result.trailers[key.strip().lower()] = value.strip()
        else:
            result.messages.append(payload)
    return result


def _headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {key.replace("_", "-"): value for key, value in headers.items()}


def reason(error: Mapping[str, Any]) -> str:
    """The ErrorInfo reason in a Connect error's details."""
    for detail in error.get("details", ()):
        if detail["type"] == "google.rpc.ErrorInfo":
            raw = detail["value"]
            info = error_details_pb2.ErrorInfo.FromString(
                base64.b64decode(raw + "=" * (-len(raw) % 4))
            )
            return str(info.reason)
    raise AssertionError(f"no ErrorInfo in {error}")
