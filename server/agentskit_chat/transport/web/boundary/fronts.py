"""What every framework front of the HTTP listener shares: routing, tokens, bodies, errors
and event streams.

A front speaks a chat framework's own protocol (AG-UI, the AI SDK's UI message stream,
OpenAI's chat completions) over the same `ChatRpcs` as Connect and gRPC, so its turns take
the same leases, limits, deadlines, drain and turn spans. A front owns the paths under its
`prefix` for every HTTP method, and answers everything there in its own error shape: the
listener does not refuse a missing token for it, the front does (`FrontCall.authenticate`).

`FrontCall` is one request: its headers, its JSON body (bounded by the listener's
`--max-request-bytes`), its principal, its telemetry (the caller's W3C trace context is
continued, so the turn span is the caller's child, and an HTTP SERVER span is opened when
tracing is on). `EventStream` is a streamed answer (server-sent events, or any chunked
body) that notices the client going away: Hypercorn silently drops what is sent after
`http.disconnect`, so a front must stop its work then (`EventStream.cancelled_when_gone`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from grpc_health.v1 import health_pb2

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.service import Principal, Reason, ServiceError, act_as
from agentskit_chat.service._tenancy import ANONYMOUS
from agentskit_chat.transport._auth import Authenticator
from agentskit_chat.transport._health import HealthService
from agentskit_chat.transport._rpcs import ChatRpcs

from .asgi import App, Headers, Message, Receive, Scope, Send, header

log = logging.getLogger("agentskit_chat.transport")

HTTP_STATUS: Final[Mapping[Reason, int]] = {
    Reason.INVALID_ARGUMENT: 400,
    Reason.DEFINITION_NOT_FOUND: 404,
    Reason.SESSION_NOT_FOUND: 404,
    Reason.TURN_NOT_FOUND: 404,
    Reason.SESSION_EXISTS: 409,
    Reason.SESSION_BUSY: 409,
    Reason.TURN_IN_PROGRESS: 409,
    Reason.CONFLICT: 409,
    Reason.REVISION_MISMATCH: 409,
    Reason.SESSION_CORRUPT: 500,
    Reason.HISTORY_MISMATCH: 409,
    Reason.LIMIT_EXCEEDED: 429,
    Reason.SHUTTING_DOWN: 503,
    Reason.STORE_UNAVAILABLE: 503,
    Reason.DEADLINE_EXCEEDED: 504,
    Reason.UNAUTHENTICATED: 401,
    Reason.RATE_LIMITED: 429,
    Reason.WATCH_BEHIND: 409,
    Reason.TOOL_CALL_UNKNOWN: 400,
    Reason.TOOL_CALLS_UNANSWERED: 400,
    Reason.NO_PENDING_TOOL_CALLS: 409,
}
"""The HTTP status of each refusal, the same for every front."""
SIZE_LIMITS: Final = frozenset(
    {"input_bytes", "history_messages", "history_bytes", "tools", "tool_schema_bytes"}
)
"""The `limit` metadata of LIMIT_EXCEEDED refusals that a smaller request mends (413)."""
SSE_HEADERS: Final[Headers] = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # nginx: pass each event on at once
]


class RequestTelemetry(Protocol):
    """Telemetry of one front request (see `agentskit_chat.telemetry.HttpTelemetry`)."""

    def start(
        self, method: str, route: str, headers: Iterable[tuple[str, str]], peer: str | None
    ) -> Callable[[int], None]:
        """Continue the caller's trace context in this task and open the request's span;
        the returned callable ends both with the response's HTTP status."""


class NoTelemetry:
    """No spans, no metrics, and the caller's trace context ignored."""

    def start(
        self, method: str, route: str, headers: Iterable[tuple[str, str]], peer: str | None
    ) -> Callable[[int], None]:
        """Nothing to start."""
        return _ignore


def _ignore(status: int) -> None:
    pass


@dataclass(frozen=True, slots=True)
class FrontContext:
    """What a front is built with: the listener's service, health, tokens and bounds."""

    rpcs: ChatRpcs
    health: HealthService
    authenticator: Authenticator | None
    max_request_bytes: int
    telemetry: RequestTelemetry = field(default_factory=NoTelemetry)


class Front(Protocol):
    """An ASGI application answering every request under its `prefix` (e.g. `/v1/`)."""

    prefix: str

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request under `prefix`."""


@dataclass(slots=True)
class FrontError(Exception):
    """A refusal a front answers in its own shape: `status`, a stable `code`, a fixed
    `message` that never repeats request content, and the request `field` at fault."""

    status: int
    code: str
    message: str
    field: str | None = None
    retry_after_seconds: int | None = None
    reason: Reason | None = None
    close: bool = False
    """The request's body was left unread, so the connection cannot carry another request:
    the answer says `Connection: close` (HTTP/1.1), and a keep-alive client opens a new one."""

    @classmethod
    def of(cls, error: ServiceError) -> FrontError:
        """The refusal of a `ServiceError`: its status, its reason's name as the code
        (`session_busy`, `limit_exceeded`...), and how long to wait when waiting helps. A
        size limit (a message or history too large or too long) is 413, which no retry
        mends; a count or rate limit is 429 with a delay."""
        status = HTTP_STATUS.get(error.reason, 500)
        limit = error.metadata.get("limit")
        if error.reason is Reason.LIMIT_EXCEEDED and limit in SIZE_LIMITS:
            status = 413
        retry_ms = error.metadata.get("retry_after_ms")
        retry = None if retry_ms is None else max(1, -(-int(retry_ms) // 1000))
        if retry is None and status == 429:
            retry = 1
        code = str(error.reason).lower().removeprefix("error_reason_")
        return cls(status, code, error.message, error.metadata.get("field"), retry, error.reason)

    def headers(self) -> Headers:
        """`Retry-After` when the refusal says how long to wait; `Connection: close` when
        the connection ends with it."""
        found: Headers = []
        if self.retry_after_seconds is not None:
            found.append((b"retry-after", str(self.retry_after_seconds).encode()))
        if self.close:
            found.append((b"connection", b"close"))
        return found


def bad_request(field: str, message: str) -> FrontError:
    """A malformed request: 400 naming the field, never its value."""
    return FrontError(400, "invalid_argument", message, field)


def unauthenticated() -> FrontError:
    """No valid bearer token: 401."""
    return FrontError(401, "unauthenticated", "a valid bearer token is required")


def draining() -> FrontError:
    """The server is shutting down: 503, retry in a second (elsewhere)."""
    return FrontError(503, "shutting_down", "the server is shutting down", None, 1)


def internal() -> FrontError:
    """Anything unexpected: 500, naming nothing of it."""
    return FrontError(500, "internal", "internal error")


class FrontCall:
    """One request to a front: headers, bounded JSON body, principal and telemetry."""

    def __init__(self, context: FrontContext, scope: Scope, receive: Receive) -> None:
        self.context = context
        self.scope = scope
        self.receive = receive
        self.method: str = scope["method"]
        self.path: str = scope["path"]

    def traced(self, route: str) -> Callable[[int], None]:
        """Start this request's telemetry under `route` (a template such as
        `/agui/{definition}`, never a path with ids in it); call the result with the
        response status when it ends."""
        headers = [
            (bytes(key).decode("latin-1"), bytes(value).decode("latin-1"))
            for key, value in self.scope.get("headers", ())
        ]
        client = self.scope.get("client")
        peer = None if not client else f"{client[0]}:{client[1]}"
        return self.context.telemetry.start(self.method, route, headers, peer)

    def header(self, name: str) -> str | None:
        """The first value of request header `name` (any case); None when absent."""
        return header(self.scope, name.lower().encode("latin-1"))

    def authenticate(self) -> Principal:
        """The caller's principal, now acted as; `unauthenticated()` without a valid token."""
        authenticator = self.context.authenticator
        if authenticator is None:
            act_as(ANONYMOUS)
            return ANONYMOUS
        headers = (
            (bytes(key).decode("latin-1"), bytes(value).decode("latin-1"))
            for key, value in self.scope.get("headers", ())
        )
        principal = authenticator.authenticate(headers)
        if principal is None:
            raise unauthenticated()
        act_as(principal)
        return principal

    def refuse_when_draining(self) -> None:
        """`draining()` once the server is shutting down: no new turn starts then."""
        if self.context.health.status() != health_pb2.HealthCheckResponse.SERVING:
            raise draining()

    async def body(self) -> bytes:
        """The whole request body, at most the listener's request size; 413 past it, and
        `ClientGoneError` when the client leaves before sending it."""
        limit = self.context.max_request_bytes
        declared = self.header("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise self._too_large()
        parts: list[bytes] = []
        size = 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                raise ClientGoneError
            chunk = bytes(message.get("body", b""))
            size += len(chunk)
            if size > limit:
                raise self._too_large()
            parts.append(chunk)
            if not message.get("more_body", False):
                return b"".join(parts)

    def _too_large(self) -> FrontError:
        """413 for a body past the limit, closing an HTTP/1 connection (HTTP/2 ends the
        stream alone, and forbids the header)."""
        error = FrontError(413, "limit_exceeded", "the request body is too large", "body")
        error.close = str(self.scope.get("http_version", "1.1")).startswith("1")
        return error

    async def json_object(self) -> dict[str, Any]:
        """The body as a JSON object; 400 naming `body` when it is not one."""
        data = await self.body()
        try:
            value = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            raise bad_request("body", "the request body is not valid JSON") from None
        except RecursionError:
            raise bad_request("body", "the request body is nested too deeply") from None
        if not isinstance(value, dict):
            raise bad_request("body", "the request body must be a JSON object")
        return value


class ClientGoneError(Exception):
    """The client closed the request before it was answered."""


class EventStream:
    """A streamed response that learns when its client goes away.

    `open` sends the status and headers; `send` one chunk of the body; `close` ends it.
    Work done inside `async with stream.cancelled_when_gone():` is cancelled when the client
    disconnects (so a turn streamed there is cancelled, and its generator closed, as a
    dropped gRPC call cancels its turn); the block then ends quietly. While a stream is
    open nothing else may call `receive`.
    """

    def __init__(self, receive: Receive, send: Send) -> None:
        self._receive = receive
        self._send = send
        self.gone = asyncio.Event()
        """Set once the client has gone away."""
        self._watch: asyncio.Task[None] | None = None
        self._worker: asyncio.Task[Any] | None = None
        self.opened = False

    async def open(self, status: int = 200, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
        """Send the response head and start watching for the client going away."""
        await self._send({"type": "http.response.start", "status": status, "headers": [*headers]})
        self.opened = True
        if self._watch is None:
            self._watch = asyncio.ensure_future(self._watch_receive())

    async def send(self, chunk: bytes) -> None:
        """Send one piece of the body (waits while the client has too much unread)."""
        if self.gone.is_set():
            return
        await self._send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def close(self) -> None:
        """End the body and stop watching."""
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        if not self.gone.is_set() and self.opened:
            with contextlib.suppress(Exception):  # the client may have gone meanwhile
                await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    @contextlib.asynccontextmanager
    async def cancelled_when_gone(self) -> AsyncIterator[None]:
        """Cancel the block's task when the client goes away; the block then ends quietly
        (the stream must be open, or be opened inside the block). A client that went away
        before the block began is not noticed here: the block's sends are dropped, and a
        front that must not start work for it checks `gone` first."""
        task = asyncio.current_task()
        assert task is not None
        self._worker = task
        try:
            yield
        except asyncio.CancelledError:
            if not self.gone.is_set():
                raise
            task.uncancel()
        finally:
            self._worker = None

    async def _watch_receive(self) -> None:
        while True:
            message: Message = await self._receive()
            if message["type"] == "http.disconnect":
                self.gone.set()
                if self._worker is not None:
                    self._worker.cancel()
                return


def sse(data: str, *, event: str | None = None, event_id: str | None = None) -> bytes:
    """One server-sent event; `data` may span lines."""
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if event is not None:
        lines.append(f"event: {event}")
    lines.extend(f"data: {line}" for line in data.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


def json_bytes(value: Any) -> bytes:
    """Compact JSON, UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


class Fronts:
    """Routes a request to the front owning its path; None when no front owns it."""

    def __init__(self, fronts: Iterable[Front]) -> None:
        self._fronts = tuple(fronts)

    def owner(self, path: str) -> App | None:
        """The front whose prefix `path` starts with."""
        for front in self._fronts:
            if path.startswith(front.prefix):
                return front
        return None


KEEP: Final = frozenset({Reason.SESSION_BUSY, Reason.TURN_IN_PROGRESS, Reason.CONFLICT})
"""Refusals that say another request is using the session: it is never forgotten then."""


def keeps(error: BaseException) -> bool:
    """Whether `error` says another request is using the session."""
    if isinstance(error, FrontError):
        return error.reason in KEEP
    return isinstance(error, ServiceError) and error.reason in KEEP


async def forget_created(
    rpcs: ChatRpcs, session_id: str, cursor: int, error: BaseException
) -> None:
    """Delete the session a request created (at `cursor`) for a turn that failed with
    `error` before it began, only while nothing has touched it: a turn of another request
    that took its lease moved the cursor, and keeps it."""
    if keeps(error):
        return
    request = pb.DeleteSessionRequest(session_id=session_id, expected_cursor=cursor)
    with contextlib.suppress(ServiceError):
        await rpcs.delete_session(request)
