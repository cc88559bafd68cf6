"""How the AI SDK front answers: a turn's events as the UI message stream over SSE (with the
`x-vercel-ai-ui-message-stream: v1` header), and refusals as JSON naming the field."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.service import ServiceError
from agentskit_chat.transport.web.boundary.asgi import Headers, Send, respond
from agentskit_chat.transport.web.boundary.fronts import (
    SSE_HEADERS,
    EventStream,
    FrontCall,
    FrontError,
    internal,
    json_bytes,
)
from agentskit_chat.transport.web.boundary.logbound import refused

from ._chunks import DONE, Chunks, chunk
from ._parts import Fields, refusal

log = logging.getLogger("agentskit_chat.transport")

STREAM_HEADERS: Final[Headers] = [*SSE_HEADERS, (b"x-vercel-ai-ui-message-stream", b"v1")]


async def stream_turn(
    call: FrontCall,
    send: Send,
    events: AsyncGenerator[pb.StreamTurnResponse, None],
    chunks: Chunks,
    fields: Fields | None = None,
) -> int:
    """Stream `events` as the UI message stream; a refusal before the first event is an
    HTTP error instead (naming the request's fields by `fields`). The turn's events stop
    when the client goes away."""
    async with aclosing(events) as turn:
        try:
            first = await anext(turn)
        except StopAsyncIteration:
            raise internal() from None
        except ServiceError as error:
            raise refusal(error, fields) from None
        stream = EventStream(call.receive, send)
        try:
            await stream.open(200, STREAM_HEADERS)
            async with stream.cancelled_when_gone():
                for item in chunks.of(first):
                    await stream.send(chunk(item))
                try:
                    async for event in turn:
                        for item in chunks.of(event):
                            await stream.send(chunk(item))
                except ServiceError as error:
                    failed = refusal(error, fields)
                    for item in chunks.failure(failed.code, failed.message):
                        await stream.send(chunk(item))
                except Exception as exc:  # the head is sent: end the stream with an error chunk
                    log.error("ai-sdk stream failed unexpectedly: %s", type(exc).__name__)
                    for item in chunks.failure("internal", "internal error"):
                        await stream.send(chunk(item))
                await stream.send(DONE)
        finally:  # however the block ended: stop watching the client, end the body
            await stream.close()
    return 200


def not_allowed() -> FrontError:
    return FrontError(405, "method_not_allowed", "this path does not take this method")


async def refuse(send: Send, error: FrontError, extra: Headers | None = None) -> int:
    """Answer `error` as JSON `{"error": {code, message, field}}`, with one log line of
    its code and field for a client mistake."""
    if error.status < 500 and error.status != 401:
        refused(f"ai-sdk request refused: {error.code} {error.field or ''}".rstrip())
    body: dict[str, object] = {"code": error.code, "message": error.message}
    if error.field is not None:
        body["field"] = error.field
    await respond(
        send,
        error.status,
        json_bytes({"error": body}),
        content_type="application/json",
        headers=[*error.headers(), *(extra or [])],
    )
    return error.status
