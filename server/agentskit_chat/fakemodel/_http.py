"""Just enough HTTP/1.1 over asyncio streams: read a request, write responses and chunks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Final

MAX_BODY: Final = 8 << 20
LAST_CHUNK: Final = b"0\r\n\r\n"


class HttpError(Exception):
    """A request this server cannot read; answered with `status`, then the connection closes."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """A request as read: header names are lower case."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes = field(repr=False)

    @property
    def keep_alive(self) -> bool:
        """Whether the client lets the connection serve another request."""
        return self.headers.get("connection", "").lower() != "close"


async def read_request(reader: asyncio.StreamReader) -> HttpRequest | None:
    """The next request on the connection; None when the client closed it between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise HttpError(400) from None
        return None
    except asyncio.LimitOverrunError:
        raise HttpError(431) from None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HttpError(400)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, colon, value = line.partition(":")
            if not colon:
                raise HttpError(400)
            headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise HttpError(411)
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise HttpError(400) from None
    if not 0 <= length <= MAX_BODY:
        raise HttpError(413)
    body = await reader.readexactly(length)
    return HttpRequest(parts[0], parts[1].split("?")[0], headers, body)


def response_head(status: int, headers: Iterable[tuple[str, str]]) -> bytes:
    """The status line and headers of a response."""
    lines = [f"HTTP/1.1 {status} {_phrase(status)}"]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def response(
    status: int,
    body: bytes,
    content_type: str,
    *,
    keep_alive: bool,
    extra: Iterable[tuple[str, str]] = (),
) -> bytes:
    """A whole response with a Content-Length."""
    headers = [("content-type", content_type), ("content-length", str(len(body)))]
    headers += [*extra, ("connection", "keep-alive" if keep_alive else "close")]
    return response_head(status, headers) + body


def chunk(data: bytes) -> bytes:
    """One piece of a chunked response body."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"
