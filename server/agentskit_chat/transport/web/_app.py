"""The HTTP listener's ASGI application: Connect and gRPC-Web calls, health, static files.

- `POST /agentskit.chat.v1.ChatService/<Method>`: the Connect application generated from
  the contract, over the same `ChatRpcs` as gRPC. Its interceptors, in order: telemetry
  (given by the caller), then authentication; both run before the request body is read.
- `GET /healthz`: `SERVING` (200) or `NOT_SERVING` (503, while draining), as the gRPC
  health service reports the server as a whole; it needs no token.
- Anything else: the static files under `--web-root` when one is given, else 404.

Everything passes through `Cors` first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from connectrpc.interceptor import Interceptor
from grpc_health.v1 import health_pb2

from agentskit.chat.v1.chat_connect import ChatServiceASGIApplication
from agentskit_chat.transport._auth import Authenticator
from agentskit_chat.transport._health import HealthService
from agentskit_chat.transport._rpcs import ChatRpcs

from ._asgi import App, Message, Receive, Scope, Send, respond
from ._codecs import CODECS
from ._cors import Cors
from ._screen import Screen
from ._service import Authentication, ConnectChatService
from ._static import StaticFiles

HEALTH_PATH: Final = "/healthz"


class WebApp:
    """Routes one request to the Connect application, health or the static files."""

    def __init__(
        self,
        connect: App,
        health: HealthService,
        static: StaticFiles | None,
        rpc_prefix: str,
        max_drain_bytes: int,
    ) -> None:
        self.connect = connect
        self.health = health
        self.static = static
        self.rpc_prefix = rpc_prefix
        self.max_drain_bytes = max_drain_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request (and the server's lifespan events)."""
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # Websockets are not served; the server closes them.
        path: str = scope["path"]
        method: str = scope["method"]
        if path.startswith(self.rpc_prefix):
            await self._rpc(scope, receive, send)
        elif method not in ("GET", "HEAD"):
            await respond(send, 405, b"method not allowed\n", headers=[(b"allow", b"GET, HEAD")])
        elif path == HEALTH_PATH:
            serving = self.health.status() == health_pb2.HealthCheckResponse.SERVING
            body = b"SERVING\n" if serving else b"NOT_SERVING\n"
            await respond(send, 200 if serving else 503, body, head=method == "HEAD")
        elif self.static is not None:
            await self.static(scope, receive, send)
        else:
            await respond(send, 404, b"not found\n", head=method == "HEAD")

    async def _rpc(self, scope: Scope, receive: Receive, send: Send) -> None:
        """One call, its answer held back until its body has been read.

        A call can be answered before its body is read (a refused token is, on purpose),
        and an HTTP/1.1 server closes the connection once it has answered a request whose
        body it did not read, while the client may still be writing it: the browser then
        sees a reset instead of the answer. So an answer that ends before the body does
        waits while the rest of the body (up to `max_drain_bytes`) is read and dropped.
        Calls that read their body first, as every accepted call does, pass straight on.
        """
        finished = False
        held: list[Message] = []

        async def tracked() -> Message:
            nonlocal finished
            message = await receive()
            if message["type"] == "http.disconnect" or not message.get("more_body", False):
                finished = True
            return message

        async def answer(message: Message) -> None:
            nonlocal finished
            if finished:
                await send(message)
                return
            held.append(message)
            if message["type"] != "http.response.body" or message.get("more_body", False):
                return
            left = self.max_drain_bytes
            while not finished and left > 0:
                left -= len((await tracked()).get("body", b""))
            for message in held:
                await send(message)
            held.clear()

        await self.connect(scope, tracked, answer)


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
    max_request_bytes: int,
    cors_origins: frozenset[str] = frozenset(),
    static: StaticFiles | None = None,
) -> App:
    """The listener's whole application."""
    connect = ChatServiceASGIApplication(
        ConnectChatService(rpcs),
        interceptors=(*interceptors, Authentication(authenticator)),
        read_max_bytes=max_request_bytes,
        codecs=CODECS,
    )
    app = WebApp(connect, health, static, connect.path + "/", max_request_bytes)
    return Cors(Screen(app, connect.path + "/"), cors_origins)
