"""The OpenAI-compatible front of the HTTP listener, under `/v1/`.

- `GET /v1/models`: the chat definitions the caller's token may use, each a model whose id
  is the definition id; `GET /v1/models/{id}` one of them.
- `POST /v1/chat/completions`: one turn of the service (see `_chat` for the session
  it runs in), answered as one `chat.completion`, or with `stream: true` as server-sent
  `chat.completion.chunk` events ending with `data: [DONE]`.

The decision (kind, route, from and to state, replayed, turn id, session id, history) is
sent as `X-AgentsKit-*` response headers and as an extra top-level `agentskit` object on
the completion and on the first chunk: OpenAI clients ignore both. Refusals are OpenAI's
`{"error": {message, type, param, code}}` with the matching status (429 and 503 with
`Retry-After`); a turn that fails after its stream began ends the stream with such an
error event instead of `[DONE]`. A client that goes away cancels the turn: the model call
stops and nothing is committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.service import Reason, ServiceError
from agentskit_chat.transport.web.boundary.asgi import (
    Headers,
    Message,
    Receive,
    Scope,
    Send,
    respond,
)
from agentskit_chat.transport.web.boundary.fronts import (
    SSE_HEADERS,
    ClientGoneError,
    FrontCall,
    FrontContext,
    FrontError,
    internal,
    json_bytes,
    sse,
)

from ._chat import Completion
from ._items import CallArguments, CallStarted, Decision, Finished, Item
from ._tools import call_arguments, call_started
from ._wire import (
    ChatRequest,
    chunk,
    completion,
    decision_headers,
    error_body,
    error_object,
    parse_request,
    usage_object,
)

log = logging.getLogger("agentskit_chat.transport")

PREFIX: Final = "/v1/"
MODELS: Final = "/v1/models"
COMPLETIONS: Final = "/v1/chat/completions"
CLIENT_GONE: Final = 499
"""The status telemetry records for a request whose client went away."""
JSON: Final = "application/json"
OWNER: Final = "agentskit-chat"
HEADER_FIELDS: Final = {"turn_id": "Idempotency-Key", "session_id": "X-AgentsKit-Session"}
"""Service fields that only the request's headers set here, named as the caller sent them."""
BRIEFLY_BUSY: Final = frozenset({Reason.SESSION_BUSY, Reason.TURN_IN_PROGRESS})
"""Refusals answered with `Retry-After: 1`: a turn usually ends within seconds, and the
OpenAI SDKs retry a 409 after the delay it gives (the lease's expiry is the worst case)."""


class OpenAIFront:
    """Answers OpenAI's models and chat completions endpoints over the service."""

    prefix = PREFIX

    def __init__(self, context: FrontContext) -> None:
        self.context = context
        self.completion = Completion(context.rpcs)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request under `/v1/`."""
        call = FrontCall(self.context, scope, receive)
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        path = call.path
        if path == COMPLETIONS:
            route, method = COMPLETIONS, "POST"
        elif path == MODELS:
            route, method = MODELS, "GET"
        elif path.startswith(MODELS + "/"):
            route, method = MODELS + "/{model}", "GET"
        else:
            route, method = PREFIX + "{path}", ""
        end = call.traced(route)
        status = 500
        try:
            call.authenticate()
            if not method:
                raise FrontError(404, "not_found", "no such endpoint")
            if call.method != method:
                raise FrontError(405, "method_not_allowed", f"use {method}")
            if route == COMPLETIONS:
                status = await self._chat(call, tracked)
            elif route == MODELS:
                status = await self._models(tracked)
            else:
                status = await self._model(path[len(MODELS) + 1 :], tracked)
        except ClientGoneError:
            status = CLIENT_GONE
        except Exception as exc:
            error = _front_error(exc)
            status = 200 if started else await _refuse(send, error)  # The status sent.
        finally:
            end(status)

    async def _models(self, send: Send) -> int:
        found = await self.context.rpcs.list_definitions(pb.ListDefinitionsRequest())
        data = [_model(d.id) for d in found.definitions]
        await respond(send, 200, json_bytes({"object": "list", "data": data}), content_type=JSON)
        return 200

    async def _model(self, model: str, send: Send) -> int:
        await self.context.rpcs.get_definition(pb.GetDefinitionRequest(definition_id=model))
        await respond(send, 200, json_bytes(_model(model)), content_type=JSON)
        return 200

    async def _chat(self, call: FrontCall, send: Send) -> int:
        call.refuse_when_draining()
        request = parse_request(await call.json_object())
        work = asyncio.ensure_future(self._answer(call, request, send))
        gone = asyncio.ensure_future(_disconnected(call))
        try:
            done, _ = await asyncio.wait((work, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (gone, work):
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
        if work in done:
            return work.result()
        return CLIENT_GONE

    async def _answer(self, call: FrontCall, request: ChatRequest, send: Send) -> int:
        async with aclosing(self.completion.run(request, call.header)) as items:
            first = await anext(items, None)
            if not isinstance(first, Decision):
                raise internal()
            fields = first.fields()
            headers = decision_headers(fields)
            if request.stream:
                # The next item first (an agentic turn's model call starts once the decision
                # is taken from the turn), so the head, the opening chunk and the first text
                # go out together; a turn failing before any text is refused with its status.
                ahead = await anext(items, None)
                return await _stream(send, request, first, fields, headers, items, ahead)
            text: list[str] = []
            usage, finish, calls = None, "stop", {}
            async for item in items:
                if isinstance(item, str):
                    text.append(item)
                elif isinstance(item, Finished):
                    usage, finish, calls = item.usage, item.finish_reason, item.calls
            ident, created = "chatcmpl-" + first.turn_id, int(time.time())
            body = completion(
                ident,
                created,
                request.model,
                "".join(text),
                usage,
                fields,
                finish=finish,
                calls=calls,
            )
            await respond(send, 200, json_bytes(body), content_type=JSON, headers=headers)
            return 200


async def _stream(
    send: Send,
    request: ChatRequest,
    decision: Decision,
    fields: dict[str, Any],
    headers: Headers,
    items: AsyncGenerator[Item, None],
    ahead: Item | None,
) -> int:
    """The turn as chunks, from `ahead` (the item after the decision) on; a failure ends
    the stream with an error event."""
    await send({"type": "http.response.start", "status": 200, "headers": [*SSE_HEADERS, *headers]})
    ident, created, model = "chatcmpl-" + decision.turn_id, int(time.time()), request.model
    usage_on = request.include_usage
    usage: tuple[int, int] | None = None
    finish = "stop"

    def data(value: dict[str, Any]) -> bytes:
        return sse(json_bytes(value).decode())

    async def event(value: dict[str, Any]) -> None:
        await send({"type": "http.response.body", "body": data(value), "more_body": True})

    def text(piece: str) -> dict[str, Any]:
        return chunk(ident, created, model, {"content": piece}, include_usage=usage_on)

    def delta(item: Item) -> dict[str, Any] | None:
        if isinstance(item, str):
            return text(item)
        if isinstance(item, CallStarted):
            opened = call_started(item.index, item.call_id, item.name)
            return chunk(ident, created, model, opened, include_usage=usage_on)
        if isinstance(item, CallArguments):
            piece = call_arguments(item.index, item.piece)
            return chunk(ident, created, model, piece, include_usage=usage_on)
        return None

    opening = {"role": "assistant", "content": ""}
    first = data(chunk(ident, created, model, opening, include_usage=usage_on, decision=fields))
    if isinstance(ahead, Finished):
        usage, finish = ahead.usage, ahead.finish_reason
    elif ahead is not None and (opening_delta := delta(ahead)) is not None:
        first += data(opening_delta)
    await send({"type": "http.response.body", "body": first, "more_body": True})
    try:
        async for item in items:
            if isinstance(item, Finished):
                usage, finish = item.usage, item.finish_reason
            elif (next_delta := delta(item)) is not None:
                await event(next_delta)
    except Exception as exc:
        error = _front_error(exc)
        await event({"error": error_object(error)})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return 200  # The status sent; the turn's span records its failure.
    await event(chunk(ident, created, model, {}, finish=finish, include_usage=usage_on))
    if usage_on:
        await event(
            chunk(ident, created, model, None, usage=usage_object(usage), include_usage=True)
        )
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})
    return 200


async def _disconnected(call: FrontCall) -> None:
    """Returns once the client has gone away."""
    while (await call.receive())["type"] != "http.disconnect":
        pass


def _model(ident: str) -> dict[str, Any]:
    return {"id": ident, "object": "model", "created": 0, "owned_by": OWNER}


def _front_error(exc: BaseException) -> FrontError:
    if isinstance(exc, FrontError):
        return exc
    if isinstance(exc, ServiceError):
        error = FrontError.of(exc)
        param = _param(error.field)
        if error.field and param and param != error.field:  # speak of the request's names
            error.message = error.message.replace(error.field, param)
        error.field = param
        if exc.reason in BRIEFLY_BUSY:  # Not the lease's expiry: the SDKs wait that long.
            error.retry_after_seconds = 1
        return error
    log.error("the openai front failed: %s", type(exc).__name__)
    return internal()


def _param(field: str | None) -> str | None:
    """The request parameter a service error's field names: a header, a message (the
    dispatched history keeps the request's positions), or the tool messages of a session."""
    if field is None:
        return None
    if field in HEADER_FIELDS:
        return HEADER_FIELDS[field]
    if field.startswith("dispatch.messages"):
        return field.removeprefix("dispatch.")
    if field.startswith("tool_results."):
        return "messages"
    return field


async def _refuse(send: Send, error: FrontError) -> int:
    headers = error.headers()
    if error.status == 401:
        headers = [*headers, (b"www-authenticate", b"Bearer")]
    await respond(send, error.status, error_body(error), content_type=JSON, headers=headers)
    return error.status
