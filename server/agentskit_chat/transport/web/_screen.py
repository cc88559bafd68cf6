"""What the HTTP listener refuses before routing, and what it hides from connectrpc's errors.

- A websocket upgrade (HTTP/1.1 `Upgrade: websocket` or HTTP/2 extended CONNECT) is refused
  with 403: nothing here speaks websockets.
- A call (a path under the service's prefix) with a header name or value that is not UTF-8
  is refused with 400 and a Connect `invalid_argument` error, before connectrpc (which
  decodes every header as UTF-8) sees it. Static files and `/healthz` ignore header values,
  so a browser's stray Latin-1 cookie does not keep a page from loading.
- connectrpc quotes some header values in its error messages (an unknown
  `Content-Encoding`, a malformed `Connect-Timeout-Ms`). A value connectrpc would refuse is
  replaced by a fixed word before the call reaches it, so the refusal keeps its code and
  protocol framing but echoes nothing the client sent.

Each refusal here writes one rate-limited WARNING line (see `_logbound`).
"""

from __future__ import annotations

import json
import re
from typing import Final

from ._asgi import App, Headers, Receive, Scope, Send, respond
from ._logbound import refused

UNDECODABLE: Final = json.dumps(
    {"code": "invalid_argument", "message": "a request header is not valid UTF-8"}
).encode()
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
    """ASGI middleware: refuses websockets and undecodable calls; masks echoed headers."""

    def __init__(self, app: App, rpc_prefix: str) -> None:
        self.app = app
        self.rpc_prefix = rpc_prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse, or pass the request on (a call with its echoed headers masked)."""
        if scope["type"] == "websocket":
            refused("websocket upgrade refused (403)")
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http" or not str(scope["path"]).startswith(self.rpc_prefix):
            await self.app(scope, receive, send)
            return
        headers: Headers = [(bytes(k), bytes(v)) for k, v in scope.get("headers", ())]
        if not all(_utf8(key) and _utf8(value) for key, value in headers):
            refused("call refused: a header is not UTF-8 (400)")
            await respond(send, 400, UNDECODABLE, content_type="application/json")
            return
        masked = [(key, _masked(key, value)) for key, value in headers]
        if masked != headers:
            scope = dict(scope)
            scope["headers"] = masked
        await self.app(scope, receive, send)


def _utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def _masked(key: bytes, value: bytes) -> bytes:
    rule = _REPLACEMENTS.get(key.lower())
    if rule is None:
        return value
    accepted, word = rule
    if isinstance(accepted, frozenset):
        return value if value.strip().lower() in accepted else word
    return value if accepted.fullmatch(value.strip()) else word
