"""Cross-origin requests from browsers: only the configured origins, each exactly.

A request whose `Origin` is allowed gets `Access-Control-Allow-Origin` naming it (and
`Vary: Origin`), with the response headers Connect and gRPC-Web clients read exposed. A
preflight (OPTIONS with `Access-Control-Request-Method`) from an allowed origin is answered
here with the methods and request headers those protocols send; from any other origin it is
refused with 403 and no CORS headers, and other requests from such origins get no CORS
headers either, so the browser keeps their responses from the page. No origin is allowed
unless configured. Credentials (cookies) are never allowed: clients send bearer tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from .asgi import App, Headers, Message, Receive, Scope, Send, header, respond

ALLOWED_METHODS: Final = "GET, POST"
ALLOWED_HEADERS: Final = ", ".join(
    (
        "Authorization",
        "Content-Type",
        "Connect-Protocol-Version",
        "Connect-Timeout-Ms",
        "Connect-Accept-Encoding",
        "Connect-Content-Encoding",
        "Grpc-Timeout",
        "Grpc-Accept-Encoding",
        "Grpc-Encoding",
        "X-Grpc-Web",
        "X-User-Agent",
        "Traceparent",
        "Tracestate",
        "Baggage",
        "Last-Event-ID",
        "AgentsKit-On-Disconnect",
        # OpenAI-compatible chat completions (`/v1/`): its SDKs' headers and the front's own.
        "Idempotency-Key",
        "OpenAI-Organization",
        "OpenAI-Project",
        "X-AgentsKit-Conversation",
        "X-AgentsKit-Session",
        "X-OpenWebUI-Chat-Id",
        "X-Conversation-Id",
        "X-Stainless-Arch",
        "X-Stainless-Lang",
        "X-Stainless-OS",
        "X-Stainless-Package-Version",
        "X-Stainless-Retry-Count",
        "X-Stainless-Runtime",
        "X-Stainless-Runtime-Version",
        "X-Stainless-Timeout",
    )
)
"""What Connect and gRPC-Web clients send, plus the bearer token and W3C trace context."""
EXPOSED_HEADERS: Final = ", ".join(
    (
        "Grpc-Status",
        "Grpc-Message",
        "Grpc-Status-Details-Bin",
        "Grpc-Encoding",
        "Connect-Content-Encoding",
        "Content-Encoding",
        "X-Vercel-AI-UI-Message-Stream",
        "Retry-After",
        # The decision of an OpenAI-compatible chat completion.
        "X-AgentsKit-Kind",
        "X-AgentsKit-Route",
        "X-AgentsKit-From-State",
        "X-AgentsKit-To-State",
        "X-AgentsKit-Replayed",
        "X-AgentsKit-Turn-Id",
        "X-AgentsKit-Session-Id",
        "X-AgentsKit-History",
    )
)
"""Trailers-in-headers of gRPC-Web errors, the encodings clients must see to decode, and
when a refused request may be tried again."""
MAX_AGE_SECONDS: Final = 7200
_ORIGIN: Final = re.compile(r"https?://[^/\s?#]+")


class OriginError(ValueError):
    """A configured origin is not `scheme://host[:port]`."""


def checked_origins(origins: Iterable[str]) -> frozenset[str]:
    """The origins, each checked to be `http(s)://host[:port]` with no path."""
    found = set()
    for origin in origins:
        value = origin.strip().rstrip("/")
        if _ORIGIN.fullmatch(value) is None:
            raise OriginError(
                f"CORS origin {origin!r} must be http(s)://host[:port] with no path, "
                "such as https://chat.example.com"
            )
        found.add(value)
    return frozenset(found)


class Cors:
    """ASGI middleware answering preflights and marking responses for allowed origins."""

    def __init__(self, app: App, origins: frozenset[str]) -> None:
        self.app = app
        self.origins = origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle a preflight here; pass everything else on, with CORS headers if allowed."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        origin = header(scope, b"origin")
        preflight = scope["method"] == "OPTIONS" and origin is not None
        preflight = preflight and header(scope, b"access-control-request-method") is not None
        allowed = origin is not None and origin in self.origins
        if preflight:
            if not allowed:
                await respond(send, 403, b"origin not allowed\n")
                return
            await respond(send, 204, headers=self._preflight(origin))
            return
        if not allowed:
            await self.app(scope, receive, send)
            return
        extra: Headers = [
            (b"access-control-allow-origin", str(origin).encode("latin-1")),
            (b"access-control-expose-headers", EXPOSED_HEADERS.encode()),
        ]

        async def send_marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*_vary_origin(message.get("headers", ())), *extra]
            await send(message)

        await self.app(scope, receive, send_marked)

    def _preflight(self, origin: str | None) -> Headers:
        return [
            (b"access-control-allow-origin", str(origin).encode("latin-1")),
            (b"access-control-allow-methods", ALLOWED_METHODS.encode()),
            (b"access-control-allow-headers", ALLOWED_HEADERS.encode()),
            (b"access-control-max-age", str(MAX_AGE_SECONDS).encode()),
            (b"vary", b"Origin, Access-Control-Request-Method, Access-Control-Request-Headers"),
        ]


def _vary_origin(headers: Iterable[tuple[bytes, bytes]]) -> Headers:
    """`headers` with `Origin` added to their one `Vary` header (made when absent)."""
    found: Headers = []
    varied = False
    for key, value in headers:
        if key.lower() == b"vary" and not varied:
            value, varied = bytes(value) + b", Origin", True
        found.append((key, value))
    return found if varied else [*found, (b"vary", b"Origin")]
