"""What the HTTP listener refuses before routing, and what it hides from connectrpc's errors.

- A websocket upgrade (HTTP/1.1 `Upgrade: websocket` or HTTP/2 extended CONNECT) is refused
  with 403: nothing here speaks websockets.
- A call (a path under the service's prefix) with a header name or value that is not UTF-8
  is refused with 400 and a Connect `invalid_argument` error, before connectrpc (which
  decodes every header as UTF-8) sees it. Static files and `/healthz` ignore header values,
  so a browser's stray Latin-1 cookie does not keep a page from loading.
- A gRPC call (`application/grpc`, not gRPC-Web) over HTTP/1.1, which has no trailers for
  its status, is refused with 415 before connectrpc fails on it.
- connectrpc quotes some header values in its error messages (an unknown
  `Content-Encoding`, a malformed `Connect-Timeout-Ms`). A value connectrpc would refuse is
  replaced by a fixed word before the call reaches it, so the refusal keeps its code and
  protocol framing but echoes nothing the client sent.
- An answer given here or by a route that does not read the request body (static files,
  health, 404, 405) ends only once that body has been read and dropped (up to `DRAIN_BYTES`
  or `DRAIN_SECONDS`): an HTTP/1.1 client still writing it then reads the answer rather
  than a reset, and an HTTP/2 client still sending DATA does not make Hypercorn drop the
  whole connection. Calls keep their own handling of this (`WebApp._rpc`).

Each refusal here writes one rate-limited WARNING line (see `_logbound`).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Final

from ._asgi import App, Headers, Message, Receive, Scope, Send, header, respond
from ._logbound import refused

DRAIN_BYTES: Final = 1024 * 1024
DRAIN_SECONDS: Final = 10.0
"""How long any answer given before its request's body was read (a refusal, a static file)
waits for the rest of that body; then it is sent anyway and the connection closed."""
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


class Screen:
    """ASGI middleware: refuses websockets and calls it cannot pass on; masks echoed
    headers; holds early answers until the request body is read."""

    def __init__(self, app: App, rpc_prefix: str) -> None:
        self.app = app
        self.rpc_prefix = rpc_prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse, or pass the request on (a call with its echoed headers masked)."""
        if scope["type"] == "websocket":
            refused("websocket upgrade refused (403)")
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = _Body(receive)
        if not str(scope["path"]).startswith(self.rpc_prefix):
            await self.app(scope, body.receive, body.after_body(send))
            return
        headers: Headers = [(bytes(k), bytes(v)) for k, v in scope.get("headers", ())]
        if not all(_utf8(key) and _utf8(value) for key, value in headers):
            refused("call refused: a header is not UTF-8 (400)")
            await body.drain()
            await respond(send, 400, UNDECODABLE, content_type="application/json")
            return
        if _grpc_without_trailers(scope):
            refused("call refused: gRPC over HTTP/1.1 (415)")
            await body.drain()
            await respond(send, 415, GRPC_NEEDS_HTTP2)
            return
        masked = [(key, _masked(key, value)) for key, value in headers]
        if masked != headers:
            scope = dict(scope)
            scope["headers"] = masked
        await self.app(scope, receive, send)


class _Body:
    """The request body as the application reads it, and what is left of it to drop."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self.finished = False

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.finished = True
        return message

    async def drain(self) -> None:
        """Read and drop the rest of the body, within `DRAIN_BYTES` and `DRAIN_SECONDS`."""
        left = DRAIN_BYTES
        try:
            async with asyncio.timeout(DRAIN_SECONDS):
                while not self.finished and left > 0:
                    left -= len((await self.receive()).get("body", b""))
        except TimeoutError:
            return

    def after_body(self, send: Send) -> Send:
        """`send`, with the answer's last message held until the body is drained."""

        async def held(message: Message) -> None:
            last = message["type"] == "http.response.body" and not message.get("more_body")
            if last and not self.finished:
                await self.drain()
            await send(message)

        return held


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
    if rule is None or not value.strip():
        return value  # connectrpc takes an empty value as an absent one
    accepted, word = rule
    if isinstance(accepted, frozenset):
        return value if value.strip().lower() in accepted else word
    return value if accepted.fullmatch(value.strip()) else word
