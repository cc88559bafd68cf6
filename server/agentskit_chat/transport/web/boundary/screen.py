"""What the HTTP listener refuses before routing, and what it hides from connectrpc's errors.

- A websocket upgrade (HTTP/1.1 `Upgrade: websocket` or HTTP/2 extended CONNECT) is refused
  with 403: nothing here speaks websockets.
- A call (a path under the service's prefix) with a header name or value that is not UTF-8
  is refused with 400 and a Connect `invalid_argument` error, before connectrpc (which
  decodes every header as UTF-8) sees it. Static files and `/healthz` ignore header values,
  so a browser's stray Latin-1 cookie does not keep a page from loading.
- A gRPC call (`application/grpc`, not gRPC-Web) over HTTP/1.1, which has no trailers for
  its status, is refused with 415 before connectrpc fails on it.
- connectrpc answers a content type a method does not take with 415 and `Accept-Post:
  application/json, application/proto` whatever the method, which is wrong for the streaming
  ones (they take enveloped `application/connect+json` or `+proto`, or gRPC-Web). The 415 of a
  known method gets the types that method takes and a one-line body saying so (only the
  method's own name; nothing the client sent). Before a token is checked, the application
  answers 401 instead, so this tells nothing to a caller without one.
- connectrpc quotes some header values in its error messages (an unknown
  `Content-Encoding`, a malformed `Connect-Timeout-Ms`). A value connectrpc would refuse is
  replaced by a fixed word before the call reaches it, so the refusal keeps its code and
  protocol framing but echoes nothing the client sent.
- Any answer given before its request's body has been read (a refusal here, a token
  refused by the application, static files, health, 404, 405) is held until that body has
  been read and dropped: at most `max_drain_bytes` (none at all when the declared length is
  larger) for at most `drain_seconds`, once per request. An HTTP/1.1 client still writing
  the body then reads the answer rather than a reset, and an HTTP/2 client still sending
  DATA does not make Hypercorn drop the whole connection. A body that does not fit is left
  unread; the server then closes the HTTP/1.1 connection after the answer. This is the only
  place that drains: the application below answers and never waits for a body itself. (The
  service has no client-streaming method, so an answer that starts before its request's
  body has ended never needs the rest of that body.)

Each refusal here writes one rate-limited WARNING line (see `logbound`).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Final

from agentskit.chat.v1 import chat_pb2

from .asgi import App, Headers, Message, Receive, Scope, Send, header, respond
from .logbound import refused

DRAIN_SECONDS: Final = 10.0
"""How long, by default, an answer given before its request's body was read (a refusal, a
static file) waits for the rest of that body; then it is sent anyway."""
UNDECODABLE: Final = json.dumps(
    {"code": "invalid_argument", "message": "a request header is not valid UTF-8"}
).encode()
GRPC_NEEDS_HTTP2: Final = b"gRPC needs HTTP/2; over HTTP/1.1 use gRPC-Web or Connect\n"
ENCODINGS: Final = frozenset({b"identity", b"gzip", b"br", b"zstd", b"deflate", b"snappy"})
_CONNECT_TIMEOUT: Final = re.compile(rb"[0-9]{1,10}")
_GRPC_TIMEOUT: Final = re.compile(rb"[0-9]{1,8}[HMSmun]")
_REPLACEMENTS: Final[dict[bytes, tuple[re.Pattern[bytes] | frozenset[bytes], bytes]]] = {
    b"connect-protocol-version": (frozenset({b"1"}), b"unsupported"),
    b"connect-timeout-ms": (_CONNECT_TIMEOUT, b"invalid"),
    b"grpc-timeout": (_GRPC_TIMEOUT, b"-"),
    b"content-encoding": (ENCODINGS, b"unsupported"),
    b"connect-content-encoding": (ENCODINGS, b"unsupported"),
    b"grpc-encoding": (ENCODINGS, b"unsupported"),
}
"""Header, the values connectrpc accepts (or may), and the word that replaces any other."""
UNARY_TYPES: Final = (
    b"application/json, application/proto, application/grpc-web+json, application/grpc-web+proto"
)
STREAM_TYPES: Final = (
    b"application/connect+json, application/connect+proto, application/grpc-web+json, "
    b"application/grpc-web+proto"
)
_SERVICE: Final = chat_pb2.DESCRIPTOR.services_by_name["ChatService"]
_STREAMING: Final = {
    f"/{_SERVICE.full_name}/{method.name}": method.server_streaming for method in _SERVICE.methods
}
"""Each method's path, and whether it streams."""


class Screen:
    """ASGI middleware: refuses websockets and calls it cannot pass on; masks echoed
    headers; holds early answers until the request body is read (within its bounds)."""

    def __init__(
        self,
        app: App,
        rpc_prefix: str,
        *,
        max_drain_bytes: int,
        drain_seconds: float = DRAIN_SECONDS,
    ) -> None:
        self.app = app
        self.rpc_prefix = rpc_prefix
        self.max_drain_bytes = max_drain_bytes
        self.drain_seconds = drain_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse, or pass the request on (a call with its echoed headers masked)."""
        if scope["type"] == "websocket":
            refused("websocket upgrade refused (403)")
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = _Body(receive, _declared(scope), self.max_drain_bytes, self.drain_seconds)
        send = body.after_body(send)
        if not str(scope["path"]).startswith(self.rpc_prefix):
            await self.app(scope, body.receive, send)
            return
        headers: Headers = [(bytes(k), bytes(v)) for k, v in scope.get("headers", ())]
        if not all(_utf8(key) and _utf8(value) for key, value in headers):
            refused("call refused: a header is not UTF-8 (400)")
            await respond(send, 400, UNDECODABLE, content_type="application/json")
            return
        if _grpc_without_trailers(scope):
            refused("call refused: gRPC over HTTP/1.1 (415)")
            await respond(send, 415, GRPC_NEEDS_HTTP2)
            return
        masked = [(key, _masked(key, value)) for key, value in headers]
        if masked != headers:
            scope = dict(scope)
            scope["headers"] = masked
        path = str(scope["path"])
        if path in _STREAMING:
            send = _media_types_named(send, path.rsplit("/", 1)[1], _STREAMING[path])
        await self.app(scope, body.receive, send)


def _media_types_named(send: Send, method: str, streaming: bool) -> Send:
    """`send`, with a 415 answer replaced by one naming the types `method` takes."""
    types = STREAM_TYPES if streaming else UNARY_TYPES
    kind = "a streaming method: send enveloped messages" if streaming else "a unary method"
    text = f"{method} is {kind} as {types.decode()}\n".encode()
    replacing = False

    async def accurate(message: Message) -> None:
        nonlocal replacing
        if message["type"] == "http.response.start" and message["status"] == 415:
            replacing = True
            refused(f"call refused: a content type {method} does not take (415)")
            await respond(send, 415, text, headers=[(b"accept-post", types)])
        elif not replacing:
            await send(message)

    return accurate


class _Body:
    """The request body as the application reads it, and its one bounded drain."""

    def __init__(
        self, receive: Receive, declared: int | None, max_bytes: int, seconds: float
    ) -> None:
        self._receive = receive
        self._declared = declared
        self._max_bytes = max_bytes
        self._seconds = seconds
        self.finished = False
        self._drained = False

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.finished = True
        return message

    async def drain(self) -> None:
        """Read and drop the rest of the body: at most `max_bytes` (none when the declared
        length is larger), for at most `seconds`; only the first time it is asked."""
        if self.finished or self._drained:
            return
        self._drained = True
        if self._declared is not None and self._declared > self._max_bytes:
            return
        left = self._max_bytes
        try:
            async with asyncio.timeout(self._seconds):
                while not self.finished and left > 0:
                    left -= len((await self.receive()).get("body", b""))
        except TimeoutError:
            return

    def after_body(self, send: Send) -> Send:
        """`send`, with an answer that starts before the body has ended held back until
        the body is drained (an answer is not buffered: the drain comes first)."""

        async def held(message: Message) -> None:
            await self.drain()
            await send(message)

        return held


def _declared(scope: Scope) -> int | None:
    """The request's declared body length, when it declares one."""
    value = (header(scope, b"content-length") or "").strip()
    return int(value) if value.isdigit() else None


def _grpc_without_trailers(scope: Scope) -> bool:
    content_type = (header(scope, b"content-type") or "").lower()
    grpc = content_type.startswith("application/grpc") and not content_type.startswith(
        "application/grpc-web"
    )
    return grpc and "http.response.trailers" not in scope.get("extensions", {})


def _utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def _masked(key: bytes, value: bytes) -> bytes:
    rule = _REPLACEMENTS.get(key.lower())
    if rule is None or not value:
        return value  # connectrpc takes an empty value as an absent one
    accepted, word = rule
    if isinstance(accepted, frozenset):
        # Exactly: connectrpc looks names up as they are, so `GZIP` is unknown to it too.
        return value if value in accepted else word
    return value if accepted.fullmatch(value.strip()) else word
