"""The few ASGI types and helpers the HTTP listener's own applications use."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, TypeAlias

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
App: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]
Headers: TypeAlias = list[tuple[bytes, bytes]]


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of request header `name` (lower case), as text; None when absent."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


async def respond(
    send: Send,
    status: int,
    body: bytes = b"",
    *,
    content_type: str = "text/plain; charset=utf-8",
    headers: Iterable[tuple[bytes, bytes]] = (),
    head: bool = False,
) -> None:
    """A whole response; `head` sends the headers only, as HEAD asks."""
    start: Headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        *headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": b"" if head else body})
