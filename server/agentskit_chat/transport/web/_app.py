"""The HTTP listener's ASGI application: Connect and gRPC-Web calls, health, static files.

- `POST /agentskit.chat.v1.ChatService/<Method>`: the Connect application generated from
  the contract, over the same `ChatRpcs` as gRPC. Its interceptors, in order: telemetry
  (given by the caller), then authentication; both run before the request body is read.
- `GET /healthz`: `SERVING` (200) or `NOT_SERVING` (503, while draining), as the gRPC
  health service reports the server as a whole; it needs no token.
- Paths under a framework front's prefix (see `boundary.fronts`): that front, for every HTTP
  method; it authenticates and answers refusals in its own protocol's shape.
- Anything else: the static files under `--web-root` when one is given, else 404.

Everything passes through `Cors` first, so preflights stay open, then `Screen`, which
refuses what nothing here could read (a websocket upgrade; under the RPC prefix, a header
that is not UTF-8 or gRPC over HTTP/1.1) whatever the path, and drains bodies. When tokens
are required, a request without a valid bearer token is refused before anything else, unless
it is a `GET`/`HEAD` outside the RPC path (health, static files): a `POST` of a real method
in a content type its protocol speaks goes on to the Connect application, whose
authentication refuses it in the caller's protocol (Connect, gRPC-Web or gRPC); anything
else (an unknown method or path, another HTTP method, another content type) gets
UNAUTHENTICATED as HTTP 401 with a Connect error JSON body, as the gRPC listener refuses an
unknown method: nothing tells what exists.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Final

from connectrpc.interceptor import Interceptor
from grpc_health.v1 import health_pb2

from agentskit.chat.v1 import chat_pb2
from agentskit_chat.transport._auth import Authenticator
from agentskit_chat.transport._guard import UNAUTHENTICATED
from agentskit_chat.transport._health import HealthService
from agentskit_chat.transport._rpcs import ChatRpcs
from agentskit_chat.transport._status import error_details

from .agui import AguiFront
from .aisdk import AiSdkFront
from .boundary.asgi import App, Receive, Scope, Send, header, respond
from .boundary.cors import Cors
from .boundary.fronts import Front, FrontContext, Fronts, NoTelemetry, RequestTelemetry
from .boundary.screen import DRAIN_SECONDS, Screen
from .boundary.static import StaticFiles
from .boundary.streams import Ends, Flows
from .connect import CODECS, Authentication, ConnectChatService, PromptHeaders
from .openai import OpenAIFront

HEALTH_PATH: Final = "/healthz"
OPEN_METHODS: Final = ("GET", "HEAD")
_GRPC_TYPES: Final = frozenset(
    f"application/{kind}{codec}"
    for kind in ("grpc", "grpc-web")
    for codec in ("", "+proto", "+json")
)
UNARY_TYPES: Final = _GRPC_TYPES | {"application/json", "application/proto"}
"""Content types of a unary call the Connect application speaks (codecs json and proto)."""
STREAM_TYPES: Final = _GRPC_TYPES | {"application/connect+json", "application/connect+proto"}
"""Content types of a streaming call the Connect application speaks."""


def _unauthenticated_body() -> bytes:
    """The Connect error JSON of UNAUTHENTICATED, with the details gRPC sends."""
    details = [
        {
            "type": detail.type_url.rsplit("/", 1)[-1],
            "value": base64.b64encode(detail.value).decode().rstrip("="),
        }
        for detail in error_details(UNAUTHENTICATED)
    ]
    error = {"code": "unauthenticated", "message": UNAUTHENTICATED.message, "details": details}
    return json.dumps(error).encode()


UNAUTHENTICATED_BODY: Final = _unauthenticated_body()


class WebApp:
    """Routes one request to the Connect application, health or the static files."""

    def __init__(
        self,
        connect: App,
        health: HealthService,
        static: StaticFiles | None,
        rpc_prefix: str,
        authenticator: Authenticator | None = None,
        streaming: Mapping[str, bool] | None = None,
        fronts: Sequence[Front] = (),
    ) -> None:
        self.connect = connect
        self.fronts = Fronts(fronts)
        self.health = health
        self.static = static
        self.rpc_prefix = rpc_prefix
        self.authenticator = authenticator
        self.streaming = streaming or {}
        """Whether each method (its path) streams; paths not in it are unknown."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request (and the server's lifespan events)."""
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # Websockets are not served; the server closes them.
        path: str = scope["path"]
        method: str = scope["method"]
        rpc = path.startswith(self.rpc_prefix)
        front = None if rpc else self.fronts.owner(path)
        if front is not None:
            await front(scope, receive, send)
        elif (rpc or method not in OPEN_METHODS) and not self._authenticated(scope):
            if self._speaks(scope):
                await self.connect(scope, receive, send)  # refused by Connect, in its protocol
            else:
                await self._refuse(scope, send)
        elif rpc:
            await self.connect(scope, receive, send)
        elif method not in OPEN_METHODS:
            await respond(send, 405, b"method not allowed\n", headers=[(b"allow", b"GET, HEAD")])
        elif path == HEALTH_PATH:
            serving = self.health.status() == health_pb2.HealthCheckResponse.SERVING
            body = b"SERVING\n" if serving else b"NOT_SERVING\n"
            await respond(send, 200 if serving else 503, body, head=method == "HEAD")
        elif self.static is not None:
            await self.static(scope, receive, send)
        else:
            await respond(send, 404, b"not found\n", head=method == "HEAD")

    def _authenticated(self, scope: Scope) -> bool:
        """Whether the request may go further: no tokens required, or a valid one given."""
        if self.authenticator is None:
            return True
        headers = (
            (bytes(key).decode("latin-1"), bytes(value).decode("latin-1"))
            for key, value in scope.get("headers", ())
        )
        return self.authenticator.authenticate(headers) is not None

    def _speaks(self, scope: Scope) -> bool:
        """Whether the request is a POST of a real method in a content type that the
        Connect application speaks for it, so nothing of it is refused before its token."""
        streaming = self.streaming.get(scope["path"])
        if streaming is None or scope["method"] != "POST":
            return False
        content_type = (header(scope, b"content-type") or "").split(";", 1)[0].strip().lower()
        return content_type in (STREAM_TYPES if streaming else UNARY_TYPES)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        """UNAUTHENTICATED (held by `Screen` until the body is read, within its bounds)."""
        await respond(
            send,
            401,
            UNAUTHENTICATED_BODY,
            content_type="application/json",
            head=scope["method"] == "HEAD",
        )


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def web_app(
    rpcs: ChatRpcs,
    health: HealthService,
    *,
    authenticator: Authenticator | None = None,
    interceptors: Sequence[Interceptor] = (),
    telemetry: RequestTelemetry | None = None,
    max_request_bytes: int,
    cors_origins: frozenset[str] = frozenset(),
    static: StaticFiles | None = None,
    drain_seconds: float = DRAIN_SECONDS,
) -> App:
    """The listener's whole application."""
    connect = PromptHeaders(
        ConnectChatService(rpcs),
        interceptors=(*interceptors, Authentication(authenticator), Ends()),
        read_max_bytes=max_request_bytes,
        codecs=CODECS,
    )
    prefix = connect.path + "/"
    service = chat_pb2.DESCRIPTOR.services_by_name["ChatService"]
    context = FrontContext(
        rpcs, health, authenticator, max_request_bytes, telemetry or NoTelemetry()
    )
    app = WebApp(
        connect,
        health,
        static,
        prefix,
        authenticator=authenticator,
        streaming={prefix + m.name: m.server_streaming for m in service.methods},
        fronts=framework_fronts(context),
    )
    screen = Screen(app, prefix, max_drain_bytes=max_request_bytes, drain_seconds=drain_seconds)
    return Flows(Cors(screen, cors_origins))


def framework_fronts(context: FrontContext) -> tuple[Front, ...]:
    """The framework fronts the listener serves, each under its own prefix."""
    return (AguiFront(context), AiSdkFront(context), OpenAIFront(context))
