"""The fake model server on the running event loop: `POST /v1/chat/completions`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import deque
from collections.abc import Mapping
from types import TracebackType
from typing import Final, Self

from ._http import HttpError, HttpRequest, read_request, response
from ._scripts import Hangup, HttpResponse, Reply, Script, Stall, ToolCalls
from ._stream import RecordedRequest, send_completion, send_reply
from ._tools import declared_tools, last_role, offers_tools, tool_results_reply

BASE_PATH: Final = "/v1"
COMPLETIONS: Final = f"{BASE_PATH}/chat/completions"


def _error_body(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()


def _last_user_text(body: object) -> str:
    """The content of the request's last user message, or "" when it has none."""
    messages = body.get("messages") if isinstance(body, dict) else None
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""


def _calls_any(script: Script, body: object) -> bool:
    """Whether `script` calls some tool in answer to `body` (always, but for a ToolCalls
    answer limited to tools the request does not offer)."""
    if not isinstance(script, ToolCalls) or script.calls or not script.only:
        return True
    return any(tool["name"] in script.only for tool in declared_tools(body))


class FakeModel:
    """A real HTTP/1.1 server speaking the Chat Completions streaming protocol.

    A request whose last user message is a key of `answers` gets that script (a ToolCalls
    answer only when the request offers tools: declares some, with a `tool_choice` other
    than `none`); any other takes the next enqueued script, or else `tool_reply` when it
    offers tools and one is set, or else streams `default`. A request whose last message
    is a tool result leaves `answers` aside: it takes the next enqueued script, or else
    `after_tools`, by default a sentence naming how many tool results it got.
    Use it on one event loop (`async with FakeModel() as model`); FakeModelServer runs one
    on a thread of its own for synchronous code.
    """

    def __init__(
        self,
        default: Reply | None = None,
        answers: Mapping[str, Script] | None = None,
        *,
        tool_reply: Script | None = None,
        after_tools: Script | None = None,
    ) -> None:
        self.default = default or Reply()
        self.answers: dict[str, Script] = dict(answers or {})
        self.tool_reply = tool_reply
        """The answer to a request that offers tools, when no key or queued script answers."""
        self.after_tools = after_tools
        """The answer to a request ending with tool results when no script is queued; None
        names how many results it got."""
        self._scripts: deque[Script] = deque()
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._disconnect = threading.Event()
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.host = ""
        self.port = 0

    @property
    def url(self) -> str:
        """The base URL to configure as `base_url`, ending in `/v1`."""
        return f"http://{self.host}:{self.port}{BASE_PATH}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def enqueue(self, *scripts: Script) -> None:
        """Answer the next requests with `scripts`, in order (safe from any thread)."""
        self._scripts.extend(scripts)

    def wait_disconnect(self, timeout: float | None = None) -> bool:
        """Block until a client left in the middle of an answer; False after `timeout`."""
        return self._disconnect.wait(timeout)

    def resume(self) -> None:
        """Let paused replies continue (call on the server's event loop)."""
        for record in self.requests:
            record.resumed.set()

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Listen on `host:port` (port 0 picks a free port)."""
        self._server = await asyncio.start_server(self._connection, host, port)
        self.host, self.port = self._server.sockets[0].getsockname()[:2]

    async def close(self) -> None:
        """Stop listening and cut every open connection."""
        if self._server is not None:
            self._server.close()
            self._server = None
        connections = list(self._connections)
        for task in connections:
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        port = int(writer.get_extra_info("peername")[1])
        try:
            while True:
                try:
                    request = await read_request(reader)
                except HttpError as exc:
                    body = _error_body("the request could not be read")
                    writer.write(response(exc.status, body, "application/json", keep_alive=False))
                    await writer.drain()
                    return
                if request is None or not await self._answer(request, port, reader, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # close() cut the connection; asyncio's own callback must not see a cancel.
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _answer(
        self,
        request: HttpRequest,
        port: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Answer one request; whether the connection may serve another one."""
        keep = request.keep_alive
        if request.path.rstrip("/") != COMPLETIONS:
            status, message = 404, "no such path"
        elif request.method != "POST":
            status, message = 405, "use POST"
        else:
            try:
                body = json.loads(request.body)
            except ValueError:
                status, message = 400, "the body is not JSON"
            else:
                return await self._script(request, body, port, reader, writer)
        writer.write(response(status, _error_body(message), "application/json", keep_alive=keep))
        await writer.drain()
        return keep

    async def _script(
        self,
        request: HttpRequest,
        body: object,
        port: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        record = RecordedRequest(request.method, request.path, request.headers, body, port)
        with self._lock:
            self._requests.append(record)
        script = self._answer_for(body)
        keep = request.keep_alive
        if isinstance(script, Hangup):
            record.finished.set()
            return False
        if isinstance(script, HttpResponse):
            extra = [] if script.retry_after is None else [("retry-after", script.retry_after)]
            payload = script.body.encode()
            writer.write(
                response(script.status, payload, script.content_type, keep_alive=keep, extra=extra)
            )
            await writer.drain()
            record.finished.set()
            return keep
        if isinstance(script, Stall) or (isinstance(body, dict) and body.get("stream") is True):
            return await self._stream(record, script, reader, writer) and keep
        writer.write(send_completion(body, script, keep_alive=keep))
        await writer.drain()
        record.finished.set()
        return keep

    def _answer_for(self, body: object) -> Script:
        if last_role(body) == "tool":
            if self._scripts:
                return self._scripts.popleft()
            return tool_results_reply(body) if self.after_tools is None else self.after_tools
        offered = offers_tools(body)
        if self.answers:
            keyed = self.answers.get(_last_user_text(body))
            if keyed is not None and (offered or not isinstance(keyed, ToolCalls)):
                return keyed
        if self._scripts:
            return self._scripts.popleft()
        if offered and self.tool_reply is not None and _calls_any(self.tool_reply, body):
            return self.tool_reply
        return self.default

    async def _stream(
        self,
        record: RecordedRequest,
        script: Reply | ToolCalls | Stall,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Send the answer while watching for the client to leave; whether to keep going."""
        watch: asyncio.Future[object] = asyncio.ensure_future(reader.read(1))
        sending: asyncio.Future[bool] = (
            asyncio.Future()  # A stall: only the client leaving ends it.
            if isinstance(script, Stall)
            else asyncio.ensure_future(send_reply(record, script, writer))
        )
        try:
            await asyncio.wait((watch, sending), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (watch, sending):
                task.cancel()
            await asyncio.gather(watch, sending, return_exceptions=True)
        if sending.done() and not sending.cancelled() and sending.exception() is None:
            return sending.result()
        record.disconnected.set()
        self._disconnect.set()
        return False
