"""A small Connect protocol client for the benchmark, over httpx: JSON messages, HTTP/1.1.

It makes the calls a browser's Connect transport makes (https://connectrpc.com/docs/protocol):

- unary: `POST /<service>/<method>`, `Content-Type: application/json`, the JSON request as
  the body; a 200 answers with the JSON response, any other status with the error JSON.
- server-streaming: `Content-Type: application/connect+json`, the request as one envelope
  (a flags byte, a 4-byte big-endian length, the JSON message); the response is a stream of
  envelopes, the last one flagged end-of-stream (0x02) and carrying the error, if any.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any, Final

import httpx

UNARY_TYPE: Final = "application/json"
STREAM_TYPE: Final = "application/connect+json"
PROTOCOL_VERSION: Final = {"Connect-Protocol-Version": "1"}
END_STREAM: Final = 0x02
COMPRESSED: Final = 0x01
_PREFIX: Final = struct.Struct(">BI")
TIMEOUT: Final = 30.0
"""Seconds an HTTP call of a benchmark client may take."""


class ConnectError(Exception):
    """A call that failed: the Connect error code (`not_found`, ...) and its message."""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message


async def own_client(stack: AsyncExitStack, address: str | None) -> httpx.AsyncClient:
    """An HTTP client of `http://address` on a connection of its own, closed with `stack`."""
    if address is None:
        raise RuntimeError("the server has no HTTP listener")
    client = httpx.AsyncClient(
        base_url=f"http://{address}", limits=httpx.Limits(max_connections=1), timeout=TIMEOUT
    )
    return await stack.enter_async_context(client)


def envelope(message: Mapping[str, Any], flags: int = 0) -> bytes:
    """One enveloped JSON message."""
    body = json.dumps(message, separators=(",", ":")).encode()
    return _PREFIX.pack(flags, len(body)) + body


class EnvelopeReader:
    """Splits a byte stream, fed in arbitrary pieces, into (flags, payload) envelopes."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Every envelope completed by `data`, in order."""
        self._buffer += data
        found: list[tuple[int, bytes]] = []
        while len(self._buffer) >= _PREFIX.size:
            flags, length = _PREFIX.unpack_from(self._buffer)
            end = _PREFIX.size + length
            if len(self._buffer) < end:
                break
            found.append((flags, bytes(self._buffer[_PREFIX.size : end])))
            del self._buffer[:end]
        return found

    @property
    def pending(self) -> int:
        """Bytes received that do not form a whole envelope yet."""
        return len(self._buffer)


def _error(body: Mapping[str, Any]) -> ConnectError:
    return ConnectError(str(body.get("code", "unknown")), str(body.get("message", "")))


async def unary(client: httpx.AsyncClient, path: str, message: Mapping[str, Any]) -> Any:
    """The JSON response of a unary call; ConnectError when it failed."""
    response = await client.post(
        path,
        content=json.dumps(message).encode(),
        headers={"Content-Type": UNARY_TYPE, **PROTOCOL_VERSION},
    )
    try:
        body = response.json()
    except ValueError:
        raise ConnectError("unknown", f"HTTP {response.status_code}, not JSON") from None
    if response.status_code != 200:
        raise _error(body if isinstance(body, dict) else {})
    return body


async def server_stream(
    client: httpx.AsyncClient, path: str, message: Mapping[str, Any]
) -> list[Any]:
    """Every JSON message of a server-streaming call; ConnectError when it failed."""
    messages: list[Any] = []
    reader = EnvelopeReader()
    async with client.stream(
        "POST", path, content=envelope(message), headers={"Content-Type": STREAM_TYPE}
    ) as response:
        if response.status_code != 200:
            try:
                body = json.loads(await response.aread())
            except ValueError:
                raise ConnectError("unknown", f"HTTP {response.status_code}") from None
            raise _error(body if isinstance(body, dict) else {})
        end: Any = None
        async for data in response.aiter_bytes():  # to the body's end: the connection is reused
            for flags, payload in reader.feed(data):
                if flags & COMPRESSED or end is not None:
                    raise ConnectError("internal", "unexpected message flags or order")
                if flags & END_STREAM:
                    end = json.loads(payload)
                else:
                    messages.append(json.loads(payload))
    if end is None or reader.pending:
        raise ConnectError("internal", "the stream ended without its end-of-stream message")
    if end.get("error"):
        raise _error(end["error"])
    return messages
